package faults_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/retry"
)

// TestFaultVhostDeleted is the last of issue 15's item 7: a server's vhost
// deleted under it. RabbitMQ cancels its consumers (basic.cancel) and then
// closes its connections (320), and refuses every reconnect (530 "vhost
// ... not found"): Run returns an error naming the vhost, whether the
// server may declare or not. Deleting a vhost deletes its messages: there
// is nothing to account for.
func TestFaultVhostDeleted(t *testing.T) {
	t.Parallel()
	for _, noDeclare := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoDeclare=%v", noDeclare), func(t *testing.T) {
			t.Parallel()
			url, vh := brokertest.FreshVhost(t, "", brokertest.SharedURL(t)) // its clean-up tolerates the vhost gone
			log := testLogger(t)
			q := "faults.vhost-deleted"
			tr := dial(t, url, log)
			if err := tr.Declare(context.Background(), acemq.Topology(q, retry.Policy{}, nil)); err != nil {
				t.Fatal(err)
			}
			run := serve(t, tr, q, &acemq.Server{NoDeclare: noDeclare, PublishTimeout: 5 * time.Second}, newLedger().handler(0), log)
			brokertest.Ctl(t, "", "delete_vhost", vh)
			deleted := time.Now()
			select {
			case err := <-run.done:
				run.done <- err
				if err == nil || !strings.Contains(err.Error(), vh) {
					t.Errorf("Run with its vhost deleted = %v, want an error naming %s", err, vh)
				}
				t.Logf("vhost deleted: Run returned after %s: %v", time.Since(deleted).Round(time.Millisecond), err)
			case <-time.After(20 * time.Second):
				t.Errorf("Run still running 20s after its vhost %s was deleted", vh)
			}
		})
	}
}
