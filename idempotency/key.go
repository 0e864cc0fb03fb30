package idempotency

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// ErrEmptyID is returned by every call of either store given an empty id.
// An empty id names no message: taking it as a key would make every
// message without an id a duplicate of the first, which loses them, and
// taking it as unique would claim to deduplicate while doing nothing. The
// server never hands a handler an empty id (it makes one up when the
// publisher sent none), so this is a mistake in code calling a store by
// hand.
var ErrEmptyID = errors.New("acemq: idempotency: empty message id")

const (
	// maxPlainKey is the longest id kept as it is: far under PostgreSQL's
	// btree limit of about 2.7 KB per index entry, and a bound on what a
	// [Memory] store holds per id.
	maxPlainKey = 255
	// hashedPrefix starts every hashed key. No plain key starts with it
	// (an id that does is hashed too), so a hashed key never equals a plain
	// one.
	hashedPrefix = "sha256:"
)

// Key returns the key both stores file id under, and [ErrEmptyID] for an
// empty id.
//
// An id of 1 to 255 printable ASCII characters (space to tilde) is its own
// key: a UUID, the id acemq makes, is stored as it is and can be read in
// the table. Any other id (longer, or holding a NUL, a newline, a byte
// that is not valid UTF-8, any non-ASCII character, or starting with
// "sha256:") is filed under "sha256:" and the hex SHA-256 of its bytes, 71
// characters. That is how every id works in every store: PostgreSQL text
// cannot hold a NUL byte or invalid UTF-8, a database whose encoding is not
// UTF-8 cannot hold every character, a btree index entry cannot exceed
// about 2.7 KB, and a [Memory] store should not keep a megabyte per
// message. The alternative, refusing such an id with an error, would
// retry and then dead-letter a message whose only fault is an id chosen by
// a publisher its consumer may not control. The cost is that such ids are
// not legible in the table: look one up by its Key.
//
// Key is what Claim, Confirm, Release and [Postgres.ClaimTx] use, so an id
// claimed by one is the same id to the others.
func Key(id string) (string, error) {
	if id == "" {
		return "", ErrEmptyID
	}
	if plain(id) {
		return id, nil
	}
	sum := sha256.Sum256([]byte(id))
	return hashedPrefix + hex.EncodeToString(sum[:]), nil
}

// plain reports whether id is its own key. It runs on every call of a
// store, so it checks eight bytes at a time.
func plain(id string) bool {
	if len(id) > maxPlainKey || strings.HasPrefix(id, hashedPrefix) {
		return false
	}
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for len(id) >= 8 {
		w := uint64(id[0]) | uint64(id[1])<<8 | uint64(id[2])<<16 | uint64(id[3])<<24 |
			uint64(id[4])<<32 | uint64(id[5])<<40 | uint64(id[6])<<48 | uint64(id[7])<<56
		below := (w - ' '*ones) &^ w & highs         // some byte < ' '
		above := (w + ('\x7f'-'~')*ones | w) & highs // some byte > '~'
		if below|above != 0 {
			return false
		}
		id = id[8:]
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < ' ' || c > '~' {
			return false
		}
	}
	return true
}

// maxQuotedID is how much of an id an error message shows.
const maxQuotedID = 64

// quoteID is id for an error message: quoted, so odd bytes show escaped,
// and cut short, so a megabyte id does not make a megabyte error.
func quoteID(id string) string {
	if len(id) <= maxQuotedID {
		return fmt.Sprintf("%q", id)
	}
	return fmt.Sprintf("%q... (%d bytes)", id[:maxQuotedID], len(id))
}
