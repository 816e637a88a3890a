//go:build race

package dataplane_test

// raceEnabled scales down load loops under the race detector, which makes
// every request several times slower.
const raceEnabled = true
