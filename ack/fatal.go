package ack

import "errors"

// ErrFatal matches, with errors.Is, every error marked by [Fatal].
var ErrFatal = errors.New("acemq: fatal")

// Fatal marks err as one that will not improve: a [Retry] carrying it skips
// the attempts that are left. The mark survives wrapping with %w, so a call
// deep in a handler's stack can make the decision. Fatal(nil) is nil.
func Fatal(err error) error {
	if err == nil {
		return nil
	}
	return &fatalError{err: err}
}

// IsFatal reports whether err, or anything it wraps, was marked by [Fatal].
func IsFatal(err error) bool { return errors.Is(err, ErrFatal) }

type fatalError struct{ err error }

func (e *fatalError) Error() string        { return e.err.Error() }
func (e *fatalError) Unwrap() error        { return e.err }
func (e *fatalError) Is(target error) bool { return target == ErrFatal }
