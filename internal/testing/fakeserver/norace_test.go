//go:build !race

package main

// raceEnabled builds the fake server with -race when its tests run with -race.
const raceEnabled = false
