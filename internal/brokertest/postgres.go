package brokertest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Postgres is a private PostgreSQL server: its own data directory in a
// temporary directory and its own port, so that a test may stop or crash
// it without disturbing the server other tests share. It runs as the
// postgres user, with trust authentication on 127.0.0.1.
type Postgres struct {
	// URL connects as the superuser postgres to the database postgres.
	URL  string
	Port int

	dir  string
	bin  string
	cred *syscall.Credential
}

// StartPostgres creates a cluster with initdb and starts it on a free port.
// Stop it with Stop; nothing else will.
func StartPostgres() (*Postgres, error) {
	bin, err := postgresBin()
	if err != nil {
		return nil, err
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("the postgres user (install postgresql): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "acemq-pg-")
	if err != nil {
		return nil, err
	}
	p := &Postgres{
		URL:  fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port),
		Port: port,
		dir:  dir,
		bin:  bin,
		cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)},
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("chown %s (run as root): %w", dir, err)
	}
	if err := p.run("initdb", "-D", p.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := p.start(); err != nil {
		p.Stop()
		return nil, err
	}
	watchdog(fmt.Sprintf("su postgres -s /bin/sh -c '%s -D %s -m immediate stop' >/dev/null 2>&1; rm -rf %s",
		filepath.Join(bin, "pg_ctl"), p.data(), dir))
	return p, nil
}

func (p *Postgres) data() string { return filepath.Join(p.dir, "data") }

func (p *Postgres) start() error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=50", p.Port, p.dir)
	return p.run("pg_ctl", "-D", p.data(), "-l", filepath.Join(p.dir, "log"), "-o", opts, "-w", "-t", "60", "start")
}

// run runs one of PostgreSQL's programs as the postgres user.
func (p *Postgres) run(program string, args ...string) error {
	cmd := exec.Command(filepath.Join(p.bin, program), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	cmd.Dir = p.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %v: %w: %s", program, args, err, out)
	}
	return nil
}

// Crash stops the server the way a crash would (pg_ctl stop -m immediate:
// no checkpoint, every connection dropped), waits down for the given
// time, and starts it again, which runs crash recovery.
func (p *Postgres) Crash(tb testing.TB, down time.Duration) {
	tb.Helper()
	if err := p.run("pg_ctl", "-D", p.data(), "-m", "immediate", "-w", "stop"); err != nil {
		tb.Fatal(err)
	}
	time.Sleep(down)
	if err := p.start(); err != nil {
		tb.Fatal(err)
	}
}

// Stop stops the server and removes its directory. It is for TestMain.
func (p *Postgres) Stop() {
	if p == nil {
		return
	}
	_ = p.run("pg_ctl", "-D", p.data(), "-m", "immediate", "-w", "stop")
	_ = os.RemoveAll(p.dir)
}

// postgresBin is the bin directory of the newest PostgreSQL installed.
func postgresBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi < vj
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i], nil
		}
	}
	return "", errors.New("no PostgreSQL server found under /usr/lib/postgresql (install postgresql)")
}

// LazyPostgres starts one private PostgreSQL server the first time Get is
// called and keeps it for every later caller; TestMain calls Stop.
type LazyPostgres struct {
	once sync.Once
	pg   *Postgres
	err  error
	lock chan struct{}
}

// Get returns the server, starting it on first use, and gives the test it
// to itself until the test ends. It gates on ACEMQ_POSTGRES_URL, so a run
// without PostgreSQL skips (or fails under CI) like every integration
// test.
func (l *LazyPostgres) Get(tb testing.TB) *Postgres {
	tb.Helper()
	if os.Getenv("ACEMQ_POSTGRES_URL") == "" {
		if os.Getenv("CI") != "" {
			tb.Fatal("CI is set but ACEMQ_POSTGRES_URL is not: integration tests may not skip (run ./scripts/test)")
		}
		tb.Skip("ACEMQ_POSTGRES_URL is not set")
	}
	l.once.Do(func() {
		l.lock = make(chan struct{}, 1)
		l.pg, l.err = StartPostgres()
	})
	if l.err != nil {
		tb.Fatalf("start a private PostgreSQL server: %v", l.err)
	}
	l.lock <- struct{}{}
	tb.Cleanup(func() { <-l.lock })
	return l.pg
}

// Stop stops the server if it was started.
func (l *LazyPostgres) Stop() {
	if l.pg != nil {
		l.pg.Stop()
	}
}
