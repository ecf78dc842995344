// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/fluidvim/fluidvim/nomad_driver/control"
	"github.com/fluidvim/fluidvim/nomad_driver/spec"
)

// fakeGuest answers every request with result (a VNF's reply; vnf/PROTOCOL.md §4).
func fakeGuest(t *testing.T, result string) *taskHandle {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var conns [2]net.Conn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		if conns[i], err = net.FileConn(f); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	t.Cleanup(func() { conns[0].Close(); conns[1].Close() })
	go func() {
		r := bufio.NewReader(conns[1])
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			var req struct{ ID *int }
			if json.Unmarshal([]byte(line), &req) != nil || req.ID == nil {
				continue // the empty line a client starts with
			}
			fmt.Fprintf(conns[1], `{"id":%d,"ok":true,"result":%s}`+"\n", *req.ID, result)
		}
	}()
	return &taskHandle{spec: spec.VNF{Name: "fake"}, ctl: control.NewClient(conns[0], "fake")}
}

func TestExecSlotsFullIsAWarning(t *testing.T) {
	h := fakeGuest(t, `{"slots":{"total":4,"used":4,"free":0,"rejected":7}}`)
	var out, errOut strings.Builder
	if code := runExec(h, []string{"slots"}, &out, &errOut); code != execWarn ||
		out.String() != "0 free of 4 session slots (4 used, 7 packets of new sessions rejected)\n" {
		t.Errorf("slots on a full VNF: %d %q %q", code, out.String(), errOut.String())
	}
}

func TestExecArgumentsAndNoAnswer(t *testing.T) {
	h := &taskHandle{spec: spec.VNF{Name: "gone"}} // no control channel
	for _, c := range []struct {
		argv []string
		code int
		err  string
	}{
		{[]string{"ping"}, execFailed, `VNF gone did not answer "ping"`},
		{[]string{"ping", "-c", "3"}, execFailed, `ping takes no arguments (got "-c 3")`},
		{[]string{"stats", "a", "b"}, execFailed, "usage: stats [KEY]"},
		{nil, execFailed, "no command given"},
		{[]string{"top"}, execUnknown, "top: unknown command"},
	} {
		var out, errOut strings.Builder
		if code := runExec(h, c.argv, &out, &errOut); code != c.code || !strings.Contains(errOut.String(), c.err) {
			t.Errorf("%q: %d %q, want %d %q", c.argv, code, errOut.String(), c.code, c.err)
		}
	}
	if argv, console := commandLine([]string{"/bin/sh", "-c", "stats nics"}); console || strings.Join(argv, " ") != "stats nics" {
		t.Errorf("sh -c: %q %v", argv, console)
	}
	if _, console := commandLine([]string{"bash"}); !console {
		t.Error("bash is the console")
	}
}
