package main

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/acemq/acemq/internal/brokertest"
)

const want = `attempt 1: the bank is not answering
attempt 2: the bank is not answering
attempt 3: the bank is not answering
dead-lettered: exhausted 3 attempts: the bank is not answering
`

func TestLeastPrivilegeOnMemory(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out, "", ""); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out.String(), want) {
		t.Errorf("output\n%s", out.String())
	}
}

// TestLeastPrivilegeOnRabbitMQ runs the service as a user with no configure
// permission at all.
func TestLeastPrivilegeOnRabbitMQ(t *testing.T) {
	adminURL, vhost := brokertest.SharedURL(t), brokertest.Env(t, "ACEMQ_AMQP_VHOST")
	user := fmt.Sprintf("acemq-payments-%d", os.Getpid())
	ctl := func(args ...string) {
		t.Helper()
		cmd := exec.Command("rabbitmqctl", args...)
		cmd.Env = append(os.Environ(), "RABBITMQ_NODENAME=rabbit@localhost")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("rabbitmqctl %v: %v\n%s", args, err, b)
		}
	}
	ctl("add_user", user, "s3cret")
	t.Cleanup(func() {
		cmd := exec.Command("rabbitmqctl", "delete_user", user)
		cmd.Env = append(os.Environ(), "RABBITMQ_NODENAME=rabbit@localhost")
		cmd.Run()
	})
	ctl("set_permissions", "-p", vhost, user, "^$", ".*", ".*") // configure nothing
	u, err := url.Parse(adminURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(user, "s3cret")
	var out bytes.Buffer
	if err := run(&out, adminURL, u.String()); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.HasSuffix(out.String(), want) {
		t.Errorf("output\n%s", out.String())
	}
}
