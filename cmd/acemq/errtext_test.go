package main

import (
	"errors"
	"testing"
)

// TestEscapeErr: joined errors each on a line of their own; a line break
// or a terminal escape inside one of them is escaped.
func TestEscapeErr(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"one", errors.New("replay stopped"), "replay stopped"},
		{"raw producer bytes", errors.New("id m\nforged line"), `id m\nforged line`},
		{"joined", errors.Join(errors.New("replay stopped"), errors.New("id m\nforged")), "replay stopped\n" + `id m\nforged`},
		{"joined in joined", errors.Join(errors.Join(errors.New("a"), errors.New("b")), errors.New("c")), "a\nb\nc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := escapeErr(tt.err); got != tt.want {
				t.Errorf("escapeErr = %q, want %q", got, tt.want)
			}
		})
	}
}
