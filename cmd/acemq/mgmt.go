package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	amqp "github.com/rabbitmq/amqp091-go"
)

// EnvManagement is the environment variable read when --management is not
// given.
const EnvManagement = "ACEMQ_MANAGEMENT_URL"

// mgmtQueue is one queue as the management plugin's HTTP API reports it
// (GET /api/queues/{vhost}). The counts are the plugin's last sample, at
// most a few seconds old (collect_statistics_interval, 5s by default); a
// queue declared since the last sample is listed without them (see
// sampled).
type mgmtQueue struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	State    string `json:"state"`
	Messages *int   `json:"messages"`
	Ready    *int   `json:"messages_ready"`
	Unacked  *int   `json:"messages_unacknowledged"`
	// DeadLettering is a quorum queue's messages waiting to be
	// dead-lettered at least once (x-dead-letter-strategy at-least-once):
	// expired or rejected, but their dead-letter target was full or
	// missing, so the queue keeps them, neither ready nor unacked, and
	// RabbitMQ offers them again about every 3 minutes
	// (dead_letter_worker_publisher_confirm_timeout). RabbitMQ 3.10.8 counts
	// them in messages too. Absent for classic queues.
	DeadLettering *int `json:"messages_dlx"`
	Consumers     *int `json:"consumers"`
	// Arguments are the queue's declaration arguments, which a breaker
	// marker (Q.breaker.<instance>) carries its state in; raw, as an
	// older broker writes none as [] rather than {} (see markerOf).
	Arguments json.RawMessage `json:"arguments"`
	// Exclusive: the queue goes with the connection that declared it, as
	// a breaker marker does.
	Exclusive bool `json:"exclusive"`
	// Node is the node the queue is on; Leader, a quorum queue's leader.
	Node   string `json:"node"`
	Leader string `json:"leader"`
	// The consumer a single-active-consumer queue delivers to: RabbitMQ
	// 3.10.8 names it single_active_consumer_tag for a classic queue and
	// single_active_consumer_ctag for a quorum queue, and leaves it out
	// until the queue's next sample.
	ActiveTag  *string `json:"single_active_consumer_tag"`
	ActiveCtag *string `json:"single_active_consumer_ctag"`
	Stats      *struct {
		Publish    *mgmtRate `json:"publish_details"`
		DeliverGet *mgmtRate `json:"deliver_get_details"`
	} `json:"message_stats"`
}

// sampled reports whether the plugin has sampled q's counts yet: it lists
// a queue as soon as it is declared, without any count until its next
// sample (about 5 s later), and a missing count is then no zero.
func (q mgmtQueue) sampled() bool {
	return q.Messages != nil || q.Ready != nil || q.Unacked != nil || q.DeadLettering != nil
}

// singleActive reports whether q was declared with
// x-single-active-consumer true, as an ordered queue is.
func (q mgmtQueue) singleActive() bool {
	var args map[string]any
	if raw := bytes.TrimSpace(q.Arguments); len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &args) != nil {
		return false // none, or [] from an older broker
	}
	return args["x-single-active-consumer"] == true
}

// activeConsumer is the tag of the consumer q delivers to, when it is a
// single-active-consumer queue and the API says.
func (q mgmtQueue) activeConsumer() string {
	for _, t := range []*string{q.ActiveTag, q.ActiveCtag} {
		if t != nil && *t != "" {
			return *t
		}
	}
	return ""
}

type mgmtRate struct {
	Rate float64 `json:"rate"`
}

// mgmtPage is one page of GET /api/queues/{vhost}?page=N.
type mgmtPage struct {
	Items     []mgmtQueue `json:"items"`
	Page      int         `json:"page"`
	PageCount int         `json:"page_count"`
}

// mgmtClient reads the management API of one broker as one user. Its
// URL carries no credentials, so that no error quotes them.
type mgmtClient struct {
	base     *url.URL // scheme and host, and a path prefix if the API is behind one
	user     string
	password string
	http     *http.Client
}

// mgmtError is the management API not answering as it should; what
// says what an operator can do about it.
type mgmtError struct {
	url  string // redacted
	what string
	err  error
}

func (e *mgmtError) Error() string {
	if e.err == nil {
		return e.what
	}
	return e.what + ": " + e.err.Error()
}

func (e *mgmtError) Unwrap() error { return e.err }

// newMgmtClient makes the client for the management API at raw (from
// --management or $ACEMQ_MANAGEMENT_URL), or, when raw is empty, at the
// AMQP URL's host: http on port 15672 for amqp://, https on 15671 for
// amqps://, RabbitMQ's defaults. Credentials in raw are used, else the
// AMQP URL's.
func newMgmtClient(raw, amqpURL string, tlsConfig *tls.Config) (*mgmtClient, error) {
	uri, err := amqp.ParseURI(amqpURL)
	if err != nil {
		return nil, err
	}
	c := &mgmtClient{user: uri.Username, password: uri.Password}
	if raw == "" {
		scheme, port := "http", "15672"
		if uri.Scheme == "amqps" {
			scheme, port = "https", "15671"
		}
		c.base = &url.URL{Scheme: scheme, Host: net.JoinHostPort(uri.Host, port)}
	} else {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, errors.New("--management: want http://host:15672 or https://host:15671")
		}
		if u.User != nil {
			c.user = u.User.Username()
			c.password, _ = u.User.Password()
			u.User = nil
		}
		u.RawQuery, u.Fragment = "", ""
		c.base = u
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsConfig
	tr.DisableKeepAlives = true // a command makes a few requests and ends: nothing left open behind it
	c.http = &http.Client{Transport: tr, Timeout: 15 * time.Second}
	return c, nil
}

// String is the API's address, without credentials.
func (c *mgmtClient) String() string { return c.base.String() }

// queues lists every queue of vhost, a page of 500 at a time.
func (c *mgmtClient) queues(ctx context.Context, vhost string) ([]mgmtQueue, error) {
	var all []mgmtQueue
	for page := 1; ; page++ {
		var p mgmtPage
		path := "/api/queues/" + url.PathEscape(vhost)
		if err := c.get(ctx, path, url.Values{"page": {strconv.Itoa(page)}, "page_size": {"500"}}, &p); err != nil {
			return nil, err
		}
		all = append(all, p.Items...)
		if page >= p.PageCount {
			return all, nil
		}
	}
}

// exchanges names every exchange of vhost, a page of 500 at a time.
func (c *mgmtClient) exchanges(ctx context.Context, vhost string) ([]string, error) {
	var names []string
	for page := 1; ; page++ {
		var p struct {
			Items []struct {
				Name string `json:"name"`
			} `json:"items"`
			PageCount int `json:"page_count"`
		}
		path := "/api/exchanges/" + url.PathEscape(vhost)
		if err := c.get(ctx, path, url.Values{"page": {strconv.Itoa(page)}, "page_size": {"500"}}, &p); err != nil {
			return nil, err
		}
		for _, x := range p.Items {
			names = append(names, x.Name)
		}
		if page >= p.PageCount {
			return names, nil
		}
	}
}

func (c *mgmtClient) get(ctx context.Context, path string, query url.Values, into any) error {
	u := *c.base
	plain, err := url.PathUnescape(path)
	if err != nil {
		return err
	}
	u.RawPath = trimSlash(u.EscapedPath()) + path // path is escaped: a vhost "/" is %2F, not a separator
	u.Path = trimSlash(u.Path) + plain
	u.RawQuery = query.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.SetBasicAuth(c.user, c.password)
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is said once, by the caller
		}
		return &mgmtError{url: c.String(), what: "the management plugin is not reachable at " + c.String(), err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return &mgmtError{url: c.String(), what: "read the management API's answer", err: err}
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return &mgmtError{url: c.String(), what: fmt.Sprintf("the management API at %s refused user %q (401): a wrong password, "+
			"or a user without the monitoring, management or administrator tag (rabbitmqctl set_user_tags %s monitoring)", c, c.user, c.user)}
	case resp.StatusCode == http.StatusNotFound:
		return &mgmtError{url: c.String(), what: fmt.Sprintf("the management API at %s has no %s (404): is the vhost there, and is this the management port?", c, path)}
	case resp.StatusCode != http.StatusOK:
		return &mgmtError{url: c.String(), what: fmt.Sprintf("the management API at %s answered %s", c, resp.Status)}
	}
	if err := json.Unmarshal(body, into); err != nil {
		return &mgmtError{url: c.String(), what: "the answer at " + c.String() + path + " is not the management API's JSON", err: err}
	}
	return nil
}

func trimSlash(s string) string {
	for len(s) > 0 && s[len(s)-1] == '/' {
		s = s[:len(s)-1]
	}
	return s
}

// withHTTPURLs returns s with the management API's URLs among its
// arguments redacted by their password alone: the AMQP redaction would
// take an http:// URL, which is no broker URL, for a password pasted
// whole and blank out its host and port wherever they appear.
func (s secrets) withHTTPURLs() secrets {
	out := secrets{pieces: slices.Clone(s.pieces), cut: slices.Clone(s.cut)}
	for _, arg := range s.args {
		i := strings.Index(arg, "http://")
		if j := strings.Index(arg, "https://"); i < 0 || (j >= 0 && j < i) {
			i = j
		}
		u, err := url.Parse(arg[max(i, 0):])
		if i < 0 || err != nil || u.Host == "" || strings.IndexFunc(arg, unicode.IsControl) >= 0 {
			out.args = append(out.args, arg)
			continue
		}
		if p, ok := u.User.Password(); ok && p != "" && !slices.Contains(out.pieces, p) {
			_, written, _ := strings.Cut(u.User.String(), ":")
			out.pieces = append(out.pieces, p, written)
		}
	}
	slices.SortStableFunc(out.pieces, func(a, b string) int { return len(b) - len(a) })
	return out
}
