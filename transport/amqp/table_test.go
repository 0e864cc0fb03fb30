package rabbitmq

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

func TestToTable(t *testing.T) {
	t.Parallel()
	now := time.Unix(1700000000, 0)
	in := map[string]any{
		"small":  42,
		"big":    int(math.MaxInt32) + 1,
		"u8":     uint8(7),
		"u64":    uint64(9),
		"s":      "x",
		"nested": map[string]any{"deep": []any{1, "two", map[string]any{"k": true}}},
		"strs":   []string{"a", "b"},
		"time":   now,
		"nil":    nil,
	}
	got, err := toTable(in)
	if err != nil {
		t.Fatal(err)
	}
	want := amqp.Table{
		"small":  int32(42),
		"big":    int64(math.MaxInt32) + 1,
		"u8":     int16(7),
		"u64":    int64(9),
		"s":      "x",
		"nested": amqp.Table{"deep": []any{int32(1), "two", amqp.Table{"k": true}}},
		"strs":   []any{"a", "b"},
		"time":   now,
		"nil":    nil,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("toTable\n got %#v\nwant %#v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Fatalf("amqp091-go refuses the table: %v", err)
	}
}

func TestToTableRefusesWithContext(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   map[string]any
		want string
	}{
		{"struct", map[string]any{"a": struct{}{}}, `field "a": unsupported header type struct {}`},
		{"nested", map[string]any{"a": map[string]any{"b": []any{1, make(chan int)}}}, `field "a": field "b": element 1: unsupported header type chan int`},
		{"overflow", map[string]any{"n": uint64(math.MaxUint64)}, "overflows"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := toTable(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestFromTable(t *testing.T) {
	t.Parallel()
	ts := time.Unix(1700000000, 0).In(time.FixedZone("X", 3600))
	in := amqp.Table{
		seqHeader:          int64(12),
		"x-delivery-count": int64(3),
		"x-death": []any{amqp.Table{
			"count": int64(1), "queue": "q", "time": ts,
			"routing-keys": []any{"q"},
		}},
		"b":   byte(1),
		"u16": uint16(2),
		"u32": uint32(3),
		"dec": amqp.Decimal{Scale: 2, Value: 314},
	}
	want := map[string]any{
		"x-delivery-count": int64(3),
		"x-death": []any{map[string]any{
			"count": int64(1), "queue": "q", "time": ts.UTC(),
			"routing-keys": []any{"q"},
		}},
		"b":   int16(1),
		"u16": int32(2),
		"u32": int64(3),
		"dec": 3.14,
	}
	if got := fromTable(in); !reflect.DeepEqual(got, want) {
		t.Fatalf("fromTable\n got %#v\nwant %#v", got, want)
	}
	if got := fromTable(amqp.Table{seqHeader: int64(1)}); got != nil {
		t.Fatalf("only the internal header: got %v, want nil", got)
	}
	if got := fromTable(nil); got != nil {
		t.Fatalf("nil: got %v", got)
	}
}

func TestReturnSeq(t *testing.T) {
	t.Parallel()
	if seq, ok := returnSeq(amqp.Table{seqHeader: int64(5)}); !ok || seq != 5 {
		t.Fatalf("got %d %v", seq, ok)
	}
	if _, ok := returnSeq(amqp.Table{seqHeader: "5"}); ok {
		t.Fatal("a string is not our id")
	}
	if _, ok := returnSeq(nil); ok {
		t.Fatal("nil headers")
	}
}
