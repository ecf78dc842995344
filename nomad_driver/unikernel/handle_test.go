// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/fluidvim/fluidvim/nomad_driver/control"
	"github.com/fluidvim/fluidvim/nomad_driver/spec"
)

// fakeGuest answers every request with result (a VNF's reply; contract/PROTOCOL.md §4); closing the
// returned connection makes it a VNF that stopped answering.
func fakeGuest(t *testing.T, result string) (*taskHandle, net.Conn) {
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
	return &taskHandle{spec: spec.VNF{Name: "fake", SessionSlots: 4},
		ctl: control.NewClient(conns[0], "fake")}, conns[1]
}

// A VNF that stops answering keeps its last free-slot count in the fingerprint: a slow reply
// must not make a full VNF look empty (and let the scheduler place a job constrained on slots).
func TestFreeSlotsKeepTheLastAnswer(t *testing.T) {
	h, guest := fakeGuest(t, `{"slots":{"total":4,"used":4,"free":0,"rejected":0}}`)
	if f := h.freeSlots(); f != 0 {
		t.Fatalf("free %d, want 0", f)
	}
	guest.Close()
	if f := h.freeSlots(); f != 0 {
		t.Errorf("free %d after the VNF stopped answering, want the last answer 0", f)
	}
	never := &taskHandle{spec: spec.VNF{Name: "new", SessionSlots: 4}}
	if f := never.freeSlots(); f != 4 {
		t.Errorf("free %d of a VNF that never answered, want its 4 slots", f)
	}
}

// TestWriteNoFollowReplacesPlantedSymlink: a job that plants a symlink where the stats file's
// temporary copy goes must not make the client write through it to a host file.
func TestWriteNoFollowReplacesPlantedSymlink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "host-file")
	if err := os.WriteFile(victim, []byte("host content\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "."+vnfStatsFile+".tmp")
	if err := os.Symlink(victim, tmp); err != nil {
		t.Fatal(err)
	}
	if err := writeNoFollow(tmp, []byte("{}\n")); err != nil {
		t.Fatalf("writeNoFollow: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "host content\n" {
		t.Errorf("the host file was written through the planted link: %q", b)
	}
	fi, err := os.Lstat(tmp)
	if err != nil || fi.Mode()&os.ModeSymlink != 0 || !fi.Mode().IsRegular() {
		t.Errorf("%s is not a fresh regular file: %v %v", tmp, fi, err)
	}
	if b, _ := os.ReadFile(tmp); string(b) != "{}\n" {
		t.Errorf("content %q", b)
	}
}
