// Package events holds the contract between the producers of kafkamender events
// (alerting, remediation pipelines, the emitter CLI) and the workers that act on
// them.
//
// An event is a CloudEvents 1.0 event published on NATS, on the subject
//
//	kafkamender.events.<cluster>.<type>
//
// where <cluster> names a Kafka cluster of the worker configuration and <type> is
// one of the event types listed by [Types]. Both are single subject tokens
// (letters, digits, '-' and '_'; see [ValidToken]), so that a consumer can filter
// on either with a NATS wildcard. The workers create the JetStream stream
// [EventsStream], which captures [EventsSubjects]; a publish succeeds only once
// that stream exists, so an event is never silently dropped by a subject that
// nothing stores.
//
// The body is the event in structured JSON mode: the [Envelope], whose data is
// the request as a JSON object. The envelope's id identifies the request end to
// end: it is the JetStream message id (so a re-publish within the stream's
// duplicate window is stored once), the key workers dedupe on, and the last
// token of the result subject. An optional expiresat extension bounds how late
// a request may still be acted on.
package events
