// Package codec turns message bodies into values and back.
//
// [JSON] is the codec the family shares. A body it cannot read is a
// [ack.Fatal] error: a decode failure will not improve with retries, and the
// decode middleware parks such a message before any handler runs.
package codec

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/acemq/acemq/ack"
)

// Codec encodes values into bodies and decodes them back.
type Codec interface {
	// ContentType is the content_type property of the bodies it writes.
	ContentType() string
	// Marshal encodes v.
	Marshal(v any) ([]byte, error)
	// Unmarshal decodes data into v. A body it cannot read is an error marked
	// with [ack.Fatal].
	Unmarshal(data []byte, v any) error
}

// Validator is implemented by codecs that can check a body without building
// a value; the decode middleware uses it when present, since it is cheaper.
type Validator interface {
	Validate(data []byte) error
}

// ErrNotJSON matches, with errors.Is, every body [JSON] refuses.
var ErrNotJSON = errors.New("acemq: this message is not JSON")

// ErrWrongShape matches, with errors.Is, a body [JSON] can parse but not
// into the value asked for (a string where a number belongs): a schema the
// consumer was never taught, not a body that is not JSON.
var ErrWrongShape = errors.New("acemq: this message is JSON of the wrong shape")

// JSON is the encoding/json codec, content type application/json.
var JSON Codec = jsonCodec{}

type jsonCodec struct{}

func (jsonCodec) ContentType() string { return "application/json" }

func (jsonCodec) Marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("acemq: encode JSON: %w", err)
	}
	return b, nil
}

func (jsonCodec) Unmarshal(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		if validJSON(data) {
			return ack.Fatal(fmt.Errorf("%w: %w", ErrWrongShape, err))
		}
		return ack.Fatal(fmt.Errorf("%w: %w", ErrNotJSON, err))
	}
	return nil
}

func (jsonCodec) Validate(data []byte) error {
	if !validJSON(data) {
		return ack.Fatal(fmt.Errorf("%w: %d bytes that do not parse", ErrNotJSON, len(data)))
	}
	return nil
}
