package codec_test

import (
	"errors"
	"testing"

	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/codec"
)

func TestJSONRefusalIsFatal(t *testing.T) {
	t.Parallel()
	type order struct{ ID int }
	var o order
	if err := codec.JSON.Unmarshal([]byte(`{"ID":"seven"}`), &o); !ack.IsFatal(err) || !errors.Is(err, codec.ErrWrongShape) || errors.Is(err, codec.ErrNotJSON) {
		t.Errorf("a string for a number = %v; want a fatal ErrWrongShape", err)
	}
	for _, body := range [][]byte{nil, []byte(""), []byte("not json"), []byte(`{"ID":7`), []byte{0xff, 0xfe}} {
		var o order
		err := codec.JSON.Unmarshal(body, &o)
		if err == nil || !ack.IsFatal(err) || !errors.Is(err, codec.ErrNotJSON) {
			t.Errorf("Unmarshal(%q) = %v; want a fatal ErrNotJSON", body, err)
		}
	}
	v := codec.JSON.(codec.Validator)
	if err := v.Validate([]byte("{oops")); !ack.IsFatal(err) {
		t.Errorf("Validate of a broken body = %v, want fatal", err)
	}
	if err := v.Validate([]byte(`{"ID":7}`)); err != nil {
		t.Errorf("Validate of good JSON = %v", err)
	}
	b, err := codec.JSON.Marshal(order{ID: 7})
	if err != nil || string(b) != `{"ID":7}` || codec.JSON.ContentType() != "application/json" {
		t.Errorf("Marshal = %s, %v", b, err)
	}
	if _, err := codec.JSON.Marshal(func() {}); err == nil {
		t.Error("Marshal of a func succeeded")
	}
}
