// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package qemu

import (
	"os"
	"strings"
	"testing"
)

// procField returns the value of "key:" in a /proc/self file ("" if absent).
func procField(t *testing.T, file, key string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/" + file)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, key+":") {
			return strings.TrimSpace(strings.TrimPrefix(line, key+":"))
		}
	}
	return ""
}

// The flags land on this process (and so on every QEMU it starts), and can be cleared again.
func TestShareVNFMemorySetsAndClearsTheProcessFlags(t *testing.T) {
	if procField(t, "status", "THP_enabled") == "" {
		t.Skip("kernel without THP_enabled in /proc/self/status")
	}
	t.Cleanup(func() { _ = ShareVNFMemory(false) })
	if err := ShareVNFMemory(true); err != nil {
		t.Skipf("prctl refused (old kernel or no CAP_SYS_RESOURCE): %v", err)
	}
	if got := procField(t, "status", "THP_enabled"); got != "0" {
		t.Fatalf("THP_enabled = %q after ShareVNFMemory(true), want 0", got)
	}
	if got := procField(t, "ksm_stat", "ksm_merge_any"); got != "" && got != "yes" {
		t.Fatalf("ksm_merge_any = %q, want yes", got)
	}
	if err := ShareVNFMemory(false); err != nil {
		t.Fatal(err)
	}
	if got := procField(t, "status", "THP_enabled"); got != "1" {
		t.Fatalf("THP_enabled = %q after ShareVNFMemory(false), want 1", got)
	}
}
