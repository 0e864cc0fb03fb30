package acemq_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

// probeStatus asks h and returns the status code and the reason.
func probeStatus(t *testing.T, h http.Handler) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	var body struct{ Status, Reason string }
	if err := json.NewDecoder(rec.Body).Decode(&body); err != nil {
		t.Fatalf("probe body: %v", err)
	}
	if (rec.Code == http.StatusOK) != (body.Status == "ok") {
		t.Errorf("status %d with body %+v", rec.Code, body)
	}
	return rec.Code, body.Reason
}

// TestReadyAndHealth walks a server through its life as a readiness and a
// liveness probe see it: not ready before Run, ready once every queue is
// subscribed (Ready closes then), not ready while the broker has ended a
// consumer and the server consumes again, and neither once stopped.
func TestReadyAndHealth(t *testing.T) {
	t.Parallel()
	broker := memory.New()
	defer broker.Close()
	conn := broker.Connect()
	defer conn.Close()
	srv := &acemq.Server{Transport: conn, Handler: acceptMux("orders")}
	if code, _ := probeStatus(t, srv.ReadyHandler()); code != http.StatusServiceUnavailable {
		t.Errorf("ready before Run: %d", code)
	}
	if err := srv.CheckLive(); err == nil {
		t.Error("alive before Run")
	}

	errc := make(chan error, 1)
	go func() { errc <- srv.Run(context.Background()) }()
	select {
	case <-srv.Ready():
	case err := <-errc:
		t.Fatalf("Run: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Ready never closed")
	}
	if info, _ := conn.Inspect(context.Background(), "orders"); info.Consumers != 1 {
		t.Errorf("Ready closed with %d consumers on orders", info.Consumers)
	}
	if code, reason := probeStatus(t, srv.ReadyHandler()); code != http.StatusOK {
		t.Errorf("ready after Ready: %d %s", code, reason)
	}
	if code, _ := probeStatus(t, srv.LiveHandler()); code != http.StatusOK {
		t.Errorf("live: %d", code)
	}

	// The queue deleted under the server: not ready until it consumes again.
	broker.DeleteQueue("orders")
	sawNotReady := false
	polltest.Until(polltest.Generous, func() bool {
		err := srv.CheckReady()
		if errors.Is(err, acemq.ErrNotReady) && strings.Contains(err.Error(), "queue orders") {
			sawNotReady = true
		}
		return sawNotReady && err == nil
	})
	if !sawNotReady || srv.CheckReady() != nil {
		t.Errorf("saw not ready: %v; ready again: %v", sawNotReady, srv.CheckReady())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	<-errc
	if code, reason := probeStatus(t, srv.ReadyHandler()); code != http.StatusServiceUnavailable || !strings.Contains(reason, "stopping") {
		t.Errorf("ready after Shutdown: %d %q", code, reason)
	}
	if err := srv.CheckLive(); err == nil {
		t.Error("alive after Run returned")
	}
}

// TestReadyStaysOpenWhenRunFails: a Run that fails before subscribing
// never says it is ready.
func TestReadyStaysOpenWhenRunFails(t *testing.T) {
	t.Parallel()
	_, conn := bare(t)
	srv := &acemq.Server{Transport: conn, Handler: acceptMux("orders"), NoDeclare: true}
	if err := srv.Run(context.Background()); !errors.Is(err, transport.ErrNotFound) {
		t.Fatalf("Run = %v", err)
	}
	select {
	case <-srv.Ready():
		t.Error("Ready closed although Run failed")
	default:
	}
	if err := srv.CheckReady(); !errors.Is(err, acemq.ErrNotReady) {
		t.Errorf("CheckReady = %v", err)
	}
}

// TestReadyWhenTheTransportIsClosed: a closed transport is not ready.
func TestReadyWhenTheTransportIsClosed(t *testing.T) {
	t.Parallel()
	f := start(t, &acemq.Server{}, map[string]acemq.Handler{"orders": acceptMux("orders")})
	<-f.srv.Ready()
	if err := f.srv.CheckReady(); err != nil {
		t.Fatalf("CheckReady = %v", err)
	}
	f.conn.Close()
	if err := f.srv.CheckReady(); !errors.Is(err, acemq.ErrNotReady) || !errors.Is(err, transport.ErrClosed) {
		t.Errorf("CheckReady on a closed transport = %v", err)
	}
}
