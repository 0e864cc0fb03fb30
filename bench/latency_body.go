package main

import (
	"fmt"
)

// The latency scenario's message bodies, which carry the phase and the
// index the recorder reads back.

// Message bodies: {"seq":"P-IIIIIIIIII","pad":"…"}, P the phase (0 the
// warm-up, 1 the calibration, 2… the loads), I the index in it; a JSON
// object of cfg.bodySize bytes, as the other scenarios send.
const (
	seqHead   = `{"seq":"`
	seqDigits = 12 // "P-IIIIIIIIII"
	seqMid    = `","pad":"`
	seqTail   = `"}`
)

// latencyBody is the body of message index of phase.
func latencyBody(size, phase, index int) []byte {
	b := make([]byte, 0, max(size, len(seqHead)+seqDigits+len(seqMid)+len(seqTail)))
	b = append(b, seqHead...)
	b = append(b, fmt.Sprintf("%d-%010d", phase%10, index)...)
	b = append(b, seqMid...)
	for i := 0; len(b) < size-len(seqTail); i++ {
		b = append(b, 'a'+byte(i%26))
	}
	return append(b, seqTail...)
}

// parseLatencyBody reads the phase and index latencyBody wrote.
func parseLatencyBody(b []byte) (phase, index int, ok bool) {
	if len(b) < len(seqHead)+seqDigits || string(b[:len(seqHead)]) != seqHead {
		return 0, 0, false
	}
	s := b[len(seqHead) : len(seqHead)+seqDigits]
	if s[0] < '0' || s[0] > '9' || s[1] != '-' {
		return 0, 0, false
	}
	for _, c := range s[2:] {
		if c < '0' || c > '9' {
			return 0, 0, false
		}
		index = index*10 + int(c-'0')
	}
	return int(s[0] - '0'), index, true
}
