//go:build race

package faults_test

// raceEnabled: this test binary runs with the race detector, and so do the workers it
// builds.
const raceEnabled = true
