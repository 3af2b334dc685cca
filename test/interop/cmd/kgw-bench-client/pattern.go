package main

import (
	"bytes"
	"encoding/binary"
)

// The benchmark's content pattern (bench/harness/pattern.ts), rebuilt the same way: xorshift32
// words from a fixed seed, little-endian as a Uint32Array on x86 lays them out, cut to a prime
// period and doubled, so that any window of up to patternPeriod bytes is contiguous. The
// pattern test in test/interop compares this program's output with the TypeScript one.
const (
	patternPeriod = 1_048_573
	patternSeed   = 0x9e3779b9
)

var doubled = func() []byte {
	words := (patternPeriod + 3) / 4
	once := make([]byte, words*4)
	x := uint32(patternSeed)
	for i := 0; i < words; i++ {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		binary.LittleEndian.PutUint32(once[i*4:], x)
	}
	once = once[:patternPeriod]
	return append(append(make([]byte, 0, 2*patternPeriod), once...), once...)
}()

// patternSource hands out consecutive slices of the pattern from a start offset.
type patternSource struct{ at int }

func newPatternSource(start int) *patternSource { return &patternSource{at: start % patternPeriod} }

// next returns the next n bytes (n ≤ patternPeriod), a view of the shared pattern.
func (s *patternSource) next(n int) []byte {
	n = min(n, patternPeriod)
	b := doubled[s.at : s.at+n]
	s.at = (s.at + n) % patternPeriod
	return b
}

// patternCheck checks consecutive chunks against the pattern from a start offset.
type patternCheck struct {
	at      int
	checked int64
}

func newPatternCheck(start int) *patternCheck { return &patternCheck{at: start % patternPeriod} }

// accept reports whether chunk is the next stretch of the pattern; on false the stretch that
// differs starts at byte `checked` of the transfer.
func (c *patternCheck) accept(chunk []byte) bool {
	for i := 0; i < len(chunk); {
		n := min(len(chunk)-i, patternPeriod)
		if !bytes.Equal(chunk[i:i+n], doubled[c.at:c.at+n]) {
			return false
		}
		i += n
		c.checked += int64(n)
		c.at = (c.at + n) % patternPeriod
	}
	return true
}
