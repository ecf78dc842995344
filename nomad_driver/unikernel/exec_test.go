// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

import (
	"strings"
	"testing"

	"github.com/fluidvim/fluidvim/nomad_driver/spec"
)

func TestExecSlotsFullIsAWarning(t *testing.T) {
	h, _ := fakeGuest(t, `{"slots":{"total":4,"used":4,"free":0,"rejected":7}}`)
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
