package slip

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/acemq/acemq"
)

// Header is the header that carries a slip: its Document as JSON.
const Header = "x-acemq-slip"

// EventHeader says which event a completed or faulted event is.
const EventHeader = "x-acemq-slip-event"

// Version is the slip document's version this package reads and writes.
const Version = 1

// MaxSize bounds the slip document, so that the headers fit one frame: a
// step whose slip would grow past it fails for good, and a slip that
// arrives larger is parked. The hops of compensation may pass it by what
// a fault adds (up to maxSent), never dropped for a few bytes.
const MaxSize = 64 << 10

// maxSent bounds what is sent at all: well inside RabbitMQ's frame of
// 128 KiB, the other headers beside it.
const maxSent = 96 << 10

// The states of a slip.
const (
	StateRunning         = "running"
	StateCompensating    = "compensating"
	StateCompleted       = "completed"        // events only
	StateFaulted         = "faulted"          // events only
	StateHalfCompensated = "half-compensated" // events only: a compensation failed for good
)

// ErrNotASlip is what Read returns for headers without a slip.
var ErrNotASlip = errors.New("acemq: slip: not a routing slip (no " + Header + " header)")

// Document is a slip as it travels: field for field the JSON of the wire
// contract. Tools read it (acemq peek); steps see it through [Slip].
type Document struct {
	Version       int                        `json:"v"`
	ID            string                     `json:"id"`
	Name          string                     `json:"name,omitempty"`
	State         string                     `json:"state"`
	Itinerary     []string                   `json:"itinerary"`
	Visited       []Visit                    `json:"visited"`
	Variables     map[string]json.RawMessage `json:"variables"`
	Compensations []Compensation             `json:"compensations"`
	Compensated   []Compensated              `json:"compensated"`
	Fault         *Fault                     `json:"fault"`
	Completed     *Destination               `json:"completed,omitempty"`
	Faulted       *Destination               `json:"faulted,omitempty"`

	// unknown keeps the fields this version does not know, as found, so
	// that a slip passing through an older reader loses nothing.
	unknown map[string]json.RawMessage
}

// Visit is a stop done.
type Visit struct {
	Stop   string          `json:"stop"`
	At     int64           `json:"at"` // Unix milliseconds
	Record json.RawMessage `json:"record,omitempty"`
}

// Compensation is the undo a step registered, to run if a later stop
// fails for good.
type Compensation struct {
	Stop  string          `json:"stop"`  // the step that registered it
	Queue string          `json:"queue"` // where it runs
	Args  json.RawMessage `json:"args,omitempty"`
}

// Compensated is a compensation that ran.
type Compensated struct {
	Stop  string `json:"stop"`
	Queue string `json:"queue"`
	At    int64  `json:"at"` // Unix milliseconds
}

// Fault is why a slip is compensated.
type Fault struct {
	Stop   string `json:"stop"`
	Reason string `json:"reason"`
	At     int64  `json:"at"` // Unix milliseconds
	// Compensation and CompensationReason name a compensation that
	// failed for good too: the slip is half-compensated.
	Compensation       string `json:"compensation,omitempty"`
	CompensationReason string `json:"compensation_reason,omitempty"`
}

// Destination is where an event goes: a queue by the default exchange, or
// an exchange with a routing key.
type Destination struct {
	Queue      string `json:"queue,omitempty"`
	Exchange   string `json:"exchange,omitempty"`
	RoutingKey string `json:"routing_key,omitempty"`
}

// ToQueue is the destination of a queue, by the default exchange.
func ToQueue(q string) *Destination { return &Destination{Queue: q} }

// ToExchange is the destination of an exchange with a routing key.
func ToExchange(exchange, key string) *Destination {
	return &Destination{Exchange: exchange, RoutingKey: key}
}

func (d *Destination) route() (exchange, key string) {
	if d.Queue != "" {
		return "", d.Queue
	}
	return d.Exchange, d.RoutingKey
}

func (d *Destination) String() string {
	if d.Queue != "" {
		return "queue " + d.Queue
	}
	return fmt.Sprintf("exchange %q (key %q)", d.Exchange, d.RoutingKey)
}

// known are the JSON fields Document reads.
var known = []string{"v", "id", "name", "state", "itinerary", "visited", "variables", "compensations", "compensated", "fault", "completed", "faulted"}

// document is Document without its methods, for encoding/json.
type document Document

// UnmarshalJSON reads a slip document, keeping the fields it does not know.
func (d *Document) UnmarshalJSON(b []byte) error {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	var dd document
	if err := json.Unmarshal(b, &dd); err != nil {
		return err
	}
	for _, k := range known {
		delete(all, k)
	}
	if len(all) > 0 {
		dd.unknown = all
	}
	*d = Document(dd)
	return nil
}

// MarshalJSON writes a slip document with the fields it did not know as
// they were.
func (d Document) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(document(d))
	if err != nil || len(d.unknown) == 0 {
		return b, err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, err
	}
	for k, v := range d.unknown {
		if _, ours := all[k]; !ours {
			all[k] = v
		}
	}
	return json.Marshal(all)
}

// Read reads the slip of a message's headers: ErrNotASlip when there is
// none, an error naming what is wrong when it cannot be read, or is of a
// version this package does not know.
func Read(headers map[string]any) (*Document, error) {
	v, ok := headers[Header]
	if !ok {
		return nil, ErrNotASlip
	}
	var raw []byte
	switch v := v.(type) {
	case string:
		raw = []byte(v)
	case []byte:
		raw = v
	default:
		return nil, fmt.Errorf("acemq: slip: %s is a %T, not a JSON string", Header, v)
	}
	if len(raw) > MaxSize {
		return nil, fmt.Errorf("acemq: slip: %s is %d bytes, over the %d a slip may hold", Header, len(raw), MaxSize)
	}
	var d Document
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("acemq: slip: %s is not a slip document: %w", Header, err)
	}
	switch {
	case d.Version != Version:
		return nil, fmt.Errorf("acemq: slip: version %d, this library reads version %d", d.Version, Version)
	case d.ID == "":
		return nil, fmt.Errorf("acemq: slip: %s has no id", Header)
	}
	return &d, nil
}

// ReadMessage is Read of a message's slip.
func ReadMessage(m *acemq.Message) (*Document, error) {
	v := m.Header(Header)
	if v == nil {
		return nil, ErrNotASlip
	}
	return Read(map[string]any{Header: v})
}

// encode is the document as the header's value, or an error when it is
// larger than MaxSize.
func (d *Document) encode() (string, error) { return d.encodeWithin(maxSent) }

// encodeWithin is encode with a bound of its own.
func (d *Document) encodeWithin(limit int) (string, error) {
	// Empty lists and objects are written [] and {}, never null, for
	// readers in other languages.
	if d.Itinerary == nil {
		d.Itinerary = []string{}
	}
	if d.Visited == nil {
		d.Visited = []Visit{}
	}
	if d.Variables == nil {
		d.Variables = map[string]json.RawMessage{}
	}
	if d.Compensations == nil {
		d.Compensations = []Compensation{}
	}
	if d.Compensated == nil {
		d.Compensated = []Compensated{}
	}
	b, err := json.Marshal(d)
	if err != nil {
		return "", fmt.Errorf("acemq: slip %s: encode: %w", d.ID, err)
	}
	if len(b) > limit {
		return "", fmt.Errorf("acemq: slip %s: its document is %d bytes, over the %d a slip may hold", d.ID, len(b), limit)
	}
	return string(b), nil
}

// clone is a deep copy of d, for a step to change.
func (d *Document) clone() *Document {
	c := *d
	c.Itinerary = append([]string(nil), d.Itinerary...)
	c.Visited = append([]Visit(nil), d.Visited...)
	c.Variables = maps.Clone(d.Variables)
	c.Compensations = append([]Compensation(nil), d.Compensations...)
	c.Compensated = append([]Compensated(nil), d.Compensated...)
	if d.Fault != nil {
		f := *d.Fault
		c.Fault = &f
	}
	c.unknown = maps.Clone(d.unknown)
	return &c
}
