package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/transport"
)

// The audit headers on an archived copy: who moved it, why, when, from
// where, and which group it was in (docs/wire-contract.md, "Archived
// copies").
const (
	HeaderArchivedBy    = "x-acemq-archived-by"
	HeaderArchivedWhy   = "x-acemq-archived-why"
	HeaderArchivedAt    = "x-acemq-archived-at" // Unix milliseconds
	HeaderArchivedFrom  = "x-acemq-archived-from"
	HeaderArchivedGroup = "x-acemq-archived-group"
	// The properties a copy cannot keep, kept as headers.
	HeaderArchivedExpiration = "x-acemq-archived-expiration"
	HeaderArchivedUserID     = "x-acemq-archived-user-id"
)

// archive keeps discarded messages whole.
type archive interface {
	name() string
	// keep returns once the copy is safe: synced to disk, or confirmed.
	keep(d transport.Delivery) error
	close() error
}

type audit struct {
	By    string    `json:"by"`
	Why   string    `json:"why"`
	At    time.Time `json:"at"`
	From  string    `json:"from"`
	Group string    `json:"group"`
}

func (a *app) openArchive(t transport.Transport, file, queue, from, group, by, why string) (archive, error) {
	au := audit{By: by, Why: why, From: from, Group: group}
	if file != "" {
		f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, err
		}
		return &fileArchive{f: f, audit: au, now: a.now}, nil
	}
	if _, err := t.Inspect(a.ctx, queue); errors.Is(err, transport.ErrNotFound) {
		if err := t.Declare(a.ctx, transport.Topology{Queues: []transport.Queue{{Name: queue, Durable: true}}}); err != nil {
			return nil, fmt.Errorf("declare the archive queue %s: %w", queue, err)
		}
		fmt.Fprintf(a.stderr, "declared the archive queue %s (durable)\n", queue)
	} else if err != nil {
		return nil, err
	}
	return &queueArchive{a: a, t: t, queue: queue, audit: au}, nil
}

// archived is one line of an archive file: the message whole.
type archived struct {
	Audit       audit          `json:"audit"`
	Exchange    string         `json:"exchange"`
	RoutingKey  string         `json:"routing_key"`
	Redelivered bool           `json:"redelivered"`
	Headers     map[string]any `json:"headers"`
	Properties  map[string]any `json:"properties"`
	Body        string         `json:"body"` // base64
}

type fileArchive struct {
	f     *os.File
	audit audit
	now   func() time.Time
}

func (f *fileArchive) name() string { return f.f.Name() }
func (f *fileArchive) close() error { return f.f.Close() }

func (f *fileArchive) keep(d transport.Delivery) error {
	au := f.audit
	au.At = f.now().UTC()
	line, err := json.Marshal(archived{Audit: au, Exchange: d.Exchange, RoutingKey: d.RoutingKey, Redelivered: d.Redelivered,
		Headers: d.Headers, Properties: properties(d.Properties), Body: base64.StdEncoding.EncodeToString(d.Body)})
	if err != nil {
		return err
	}
	if _, err := f.f.Write(append(line, '\n')); err != nil {
		return err
	}
	return f.f.Sync()
}

// properties are the AMQP properties set, by their AMQP names.
func properties(p transport.Properties) map[string]any {
	m := map[string]any{}
	set := func(k string, v string) {
		if v != "" {
			m[k] = v
		}
	}
	set("content_type", p.ContentType)
	set("content_encoding", p.ContentEncoding)
	set("correlation_id", p.CorrelationID)
	set("reply_to", p.ReplyTo)
	set("expiration", p.Expiration)
	set("message_id", p.MessageID)
	set("type", p.Type)
	set("user_id", p.UserID)
	set("app_id", p.AppID)
	if p.DeliveryMode != 0 {
		m["delivery_mode"] = p.DeliveryMode
	}
	if p.Priority != 0 {
		m["priority"] = p.Priority
	}
	if !p.Timestamp.IsZero() {
		m["timestamp"] = p.Timestamp.UTC()
	}
	return m
}

type queueArchive struct {
	a     *app
	t     transport.Transport
	queue string
	audit audit
}

func (q *queueArchive) name() string { return q.queue }
func (q *queueArchive) close() error { return nil }

// keep publishes the message whole, with the audit headers, to the archive
// queue, persistent and mandatory, and waits for its confirm. A per-message
// TTL is not kept (it would expire in the archive) and a user id is not
// kept (the broker refuses another user's): both go in headers.
func (q *queueArchive) keep(d transport.Delivery) error {
	h := maps.Clone(d.Headers)
	if h == nil {
		h = map[string]any{}
	}
	h[HeaderArchivedBy] = q.audit.By
	h[HeaderArchivedWhy] = q.audit.Why
	h[HeaderArchivedAt] = q.a.now().UnixMilli()
	h[HeaderArchivedFrom] = q.audit.From
	h[HeaderArchivedGroup] = q.audit.Group
	props := d.Properties
	if props.Expiration != "" {
		h[HeaderArchivedExpiration] = props.Expiration
		props.Expiration = ""
	}
	if props.UserID != "" {
		h[HeaderArchivedUserID] = props.UserID
		props.UserID = ""
	}
	props.DeliveryMode = 2
	ctx, cancel := context.WithTimeout(context.WithoutCancel(q.a.ctx), acemq.DefaultPublishTimeout)
	defer cancel()
	conf, err := q.t.Publish(ctx, transport.Publishing{RoutingKey: q.queue, Mandatory: true, Headers: h, Properties: props, Body: d.Body})
	switch {
	case err != nil:
		return err
	case !conf.Routed:
		return acemq.ErrUnroutable
	}
	return nil
}
