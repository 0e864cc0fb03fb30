package main

import (
	"bufio"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The broker's CPU time per message shows what bounds the broker
// scenarios on a small machine: when the broker needs several times the
// client's CPU per message, the client's efficiency moves throughput only
// as much as the CPU it leaves to the broker.

// clockTick is the unit of /proc/<pid>/stat times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// brokerPID finds the process listening on the URL's port on this
// machine, through /proc; 0 when there is none or it cannot be told.
func brokerPID(amqpURL string) int {
	u, err := url.Parse(amqpURL)
	if err != nil {
		return 0
	}
	switch u.Hostname() {
	case "localhost", "127.0.0.1", "::1", "":
	default:
		return 0
	}
	port := 5672
	if p := u.Port(); p != "" {
		if port, err = strconv.Atoi(p); err != nil {
			return 0
		}
	}
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		listeningInodes(f, port, inodes)
	}
	if len(inodes) == 0 {
		return 0
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range procs {
		target, err := os.Readlink(fd)
		if err != nil || !strings.HasPrefix(target, "socket:[") {
			continue
		}
		if inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] {
			pid, _ := strconv.Atoi(strings.Split(fd, "/")[2])
			return pid
		}
	}
	return 0
}

// listeningInodes adds the inodes of the sockets listening on port.
func listeningInodes(path string, port int, into map[string]bool) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	want := fmt.Sprintf(":%04X", port)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		// sl local_address rem_address st ... inode (field 9)
		if len(fields) > 9 && strings.HasSuffix(fields[1], want) && fields[3] == "0A" {
			into[fields[9]] = true
		}
	}
}

// processCPUOf is the CPU time (user and system) pid has used; ok is false
// when it cannot be read.
func processCPUOf(pid int) (time.Duration, bool) {
	if pid <= 0 {
		return 0, false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name, in parentheses, may hold spaces: count fields after it.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	fields := strings.Fields(s[i+1:])
	// fields[0] is the state (field 3); utime and stime are fields 14 and 15.
	if len(fields) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(fields[11], 10, 64)
	st, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * clockTick, true
}
