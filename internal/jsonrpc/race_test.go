//go:build race

package jsonrpc

// raceEnabled reports a build with the race detector, whose shadow memory
// counts in the resident size.
const raceEnabled = true
