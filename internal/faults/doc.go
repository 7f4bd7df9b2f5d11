// Package faults holds kafkamender's fault tests: real worker processes (the cmd/worker
// binary) against the real local stack, killed with SIGKILL at each step of each operation,
// stopped with SIGTERM mid-copy, cut from ZooKeeper until their session expires, with a
// broker stopped or the controller killed under them. After each fault the tests check the
// promise operators rely on: every event has exactly one final result; the cluster ends in
// the requested state or the state before the event, never between; nothing of ours is
// left (journal entry, reassignment, throttle, lock); what others set is untouched; and the
// result's changes are what the cluster shows.
//
// Workers stop at a step through the KAFKAMENDER_PAUSE_AT environment variable (see
// internal/worker): they print "KAFKAMENDER-PAUSED <step>" and stop there for ever, and the
// test kills them.
package faults
