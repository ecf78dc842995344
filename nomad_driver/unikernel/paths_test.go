// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/client/allocdir"
	"github.com/hashicorp/nomad/plugins/drivers"

	"github.com/fluidvim/fluidvim/nomad_driver/control"
	"github.com/fluidvim/fluidvim/nomad_driver/spec"
)

// marker stands for a secret in a host file a job must not read (an AWS documentation key).
const marker = "AKIAIOSFODNN7EXAMPLE"

// pathsFixture is a task directory as Nomad builds it, an image_paths directory, the operator's
// kernel directory and a directory the job has no business in, all in one t.TempDir.
type pathsFixture struct {
	root, outside, images, opt string
	task                       *drivers.TaskConfig
	cfg                        *Config
}

func newPathsFixture(t *testing.T) *pathsFixture {
	t.Helper()
	root := t.TempDir()
	f := &pathsFixture{root: root, outside: filepath.Join(root, "outside"),
		images: filepath.Join(root, "images"), opt: filepath.Join(root, "opt")}
	f.task = &drivers.TaskConfig{AllocDir: filepath.Join(root, "alloc", "0f3c"), Name: "vnf"}
	td := f.task.TaskDir()
	private := filepath.Join(td.Dir, allocdir.TaskPrivate)
	for _, d := range []string{td.LocalDir, td.SecretsDir, private,
		filepath.Join(td.SharedAllocDir, "data"), f.outside, f.images, f.opt} {
		mkdir(t, d)
	}
	write(t, filepath.Join(f.outside, "secret"), marker+"\n")
	write(t, filepath.Join(f.outside, "vnf.elf"), "ELF outside")
	write(t, filepath.Join(f.outside, spec.PVHFirmware), "firmware outside")
	write(t, filepath.Join(td.LocalDir, "vnf.elf"), "ELF local")
	write(t, filepath.Join(td.LocalDir, "..dots.elf"), "ELF with a name starting with ..")
	write(t, filepath.Join(td.LocalDir, "fw.click"), "FromDevice(0) -> ToDevice(0);")
	write(t, filepath.Join(td.SecretsDir, "fw.click"), "FromDevice(0) -> ToDevice(0);")
	write(t, filepath.Join(private, "token"), marker)
	write(t, filepath.Join(td.SharedAllocDir, "data", "fw.click"), "FromDevice(0) -> ToDevice(0);")
	write(t, filepath.Join(f.images, "vnf.elf"), "ELF image")
	write(t, filepath.Join(f.images, "fw.click"), marker+" -> Discard;")
	write(t, filepath.Join(f.opt, "fluidvim-vnf.elf"), "ELF operator")
	write(t, filepath.Join(f.opt, "pool.elf"), "ELF pool")
	link(t, "/etc/shadow", filepath.Join(td.LocalDir, "shadow"))
	link(t, filepath.Join(f.outside, "secret"), filepath.Join(td.LocalDir, "secret"))
	link(t, "../../../../outside", filepath.Join(td.LocalDir, "out")) // a relative link to a dir
	link(t, filepath.Join(f.outside, "secret"), filepath.Join(f.images, "evil.elf"))
	link(t, filepath.Join(f.opt, "fluidvim-vnf.elf"), filepath.Join(td.LocalDir, "operator.elf"))
	link(t, filepath.Join(f.images, "vnf.elf"), filepath.Join(td.LocalDir, "image.elf"))
	link(t, f.images, filepath.Join(root, "images-link"))
	f.cfg = &Config{Kernel: filepath.Join(f.opt, "fluidvim-vnf.elf"),
		WarmPool: []PoolConfig{{Kernel: filepath.Join(f.opt, "pool.elf")}}}
	return f
}

func mkdir(t *testing.T, d string) {
	t.Helper()
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, p, text string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func link(t *testing.T, target, p string) {
	t.Helper()
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

// real is p with its symlinks resolved (t.TempDir may be below one).
func real(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// checkRefusal fails unless err is a FieldError naming field, quoting the path as given, giving
// the fix and nothing of the marker file.
func checkRefusal(t *testing.T, err error, field, given string) {
	t.Helper()
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != field {
		t.Fatalf("%s %q: want a FieldError naming %s, got %v", field, given, field, err)
	}
	for _, want := range []string{`"` + given + `"`, "task dir", "image_paths"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s %q: the error does not say %q: %v", field, given, want, err)
		}
	}
	if strings.Contains(err.Error(), marker) {
		t.Errorf("%s %q: the error quotes the file: %v", field, given, err)
	}
}

func TestKernelConfinement(t *testing.T) {
	f := newPathsFixture(t)
	td := f.task.TaskDir()
	images := real(t, f.images)
	for _, c := range []struct {
		name, given string
		imagePaths  []string
		want        string // the resolved path; "" = refused
		trusted     bool
		echo        bool
	}{
		{"host file", "/etc/shadow", nil, "", false, false},
		{"host file, image_paths set", "/etc/shadow", []string{f.images}, "", false, false},
		{"relative escape", "../../../../etc/shadow", nil, "", false, false},
		{"escape through local/..", "local/../../../../outside/secret", nil, "", false, false},
		{"absolute escape through ..", filepath.Join(td.LocalDir, "../../../../outside/secret"), nil, "", false, false},
		{"symlink in the task dir to /etc/shadow", "local/shadow", nil, "", false, false},
		{"symlink in the task dir to a host file", filepath.Join(td.LocalDir, "secret"), nil, "", false, false},
		{"through a symlinked dir in the task dir", "local/out/secret", nil, "", false, false},
		{"missing file in the task dir", "local/nothing.elf", nil, "", false, false},
		{"Nomad's private dir", "private/token", nil, "", false, false},
		{"image dir not allowlisted", filepath.Join(f.images, "vnf.elf"), nil, "", false, false},
		{"symlink in an allowlisted dir pointing outside", filepath.Join(f.images, "evil.elf"),
			[]string{f.images}, "", false, false},
		{"task dir, relative", "local/vnf.elf", nil, filepath.Join(td.LocalDir, "vnf.elf"), false, true},
		{"task dir, absolute", filepath.Join(td.LocalDir, "vnf.elf"), nil, filepath.Join(td.LocalDir, "vnf.elf"), false, true},
		{"a name starting with ..", "local/..dots.elf", nil, filepath.Join(td.LocalDir, "..dots.elf"), false, true},
		{"allowlisted dir", filepath.Join(f.images, "vnf.elf"), []string{f.images},
			filepath.Join(images, "vnf.elf"), false, false},
		{"allowlisted dir named through a symlink", filepath.Join(f.images, "vnf.elf"),
			[]string{filepath.Join(f.root, "images-link")}, filepath.Join(images, "vnf.elf"), false, false},
		{"symlink in the task dir into an allowlisted dir", "local/image.elf", []string{f.images},
			filepath.Join(images, "vnf.elf"), false, false},
		{"symlink in the task dir into a dir not allowlisted", "local/image.elf", nil, "", false, false},
		{"the plugin's kernel (unset)", "", nil, f.cfg.Kernel, true, false},
		{"the plugin's kernel (named)", f.cfg.Kernel, nil, f.cfg.Kernel, true, false},
		{"a warm_pool kernel", f.cfg.WarmPool[0].Kernel, nil, f.cfg.WarmPool[0].Kernel, true, false},
		{"symlink in the task dir to the plugin's kernel", "local/operator.elf", nil,
			real(t, f.cfg.Kernel), true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := *f.cfg
			cfg.ImagePaths = c.imagePaths
			got, err := taskPaths(f.task, &cfg).kernel(c.given)
			if c.want == "" {
				checkRefusal(t, err, "kernel", c.given)
				return
			}
			want := c.want
			if !c.trusted {
				want = real(t, want)
			}
			if err != nil || got.Path != want || got.Trusted != c.trusted || got.Echo != c.echo {
				t.Fatalf("got %+v, %v; want path %s trusted %v echo %v", got, err, want, c.trusted, c.echo)
			}
		})
	}
}

func TestRefusalDoesNotTellMissingFromForbidden(t *testing.T) {
	f := newPathsFixture(t)
	p := taskPaths(f.task, f.cfg)
	_, missing := p.kernel("/etc/no-such-file-here")
	_, forbidden := p.kernel("/etc/shadow")
	if missing == nil || forbidden == nil || strings.ReplaceAll(missing.Error(), "no-such-file-here",
		"shadow") != forbidden.Error() {
		t.Fatalf("a missing and a forbidden file should read alike:\n%v\n%v", missing, forbidden)
	}
}

func TestClickFileConfinement(t *testing.T) {
	f := newPathsFixture(t)
	for _, c := range []struct {
		name, given string
		imagePaths  []string
		ok, echo    bool
	}{
		{"host file", "/etc/shadow", nil, false, false},
		{"relative escape", "../../../../../../../../etc/shadow", nil, false, false},
		{"marker file outside", filepath.Join(f.outside, "secret"), nil, false, false},
		{"symlink in the task dir to the marker file", "local/secret", nil, false, false},
		{"the plugin's kernel is not a click file", f.cfg.Kernel, nil, false, false},
		{"Nomad's private dir", "private/token", nil, false, false},
		{"symlink in an allowlisted dir pointing outside", filepath.Join(f.images, "evil.elf"),
			[]string{f.images}, false, false},
		{"local/", "local/fw.click", nil, true, true},
		{"the shared alloc dir", "../alloc/data/fw.click", nil, true, true},
		{"secrets/: read, never echoed", "secrets/fw.click", nil, true, false},
		{"allowlisted: read, never echoed", filepath.Join(f.images, "fw.click"), []string{f.images}, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := *f.cfg
			cfg.ImagePaths = c.imagePaths
			text, echo, err := taskPaths(f.task, &cfg).clickText(&TaskConfig{ClickFile: c.given})
			if !c.ok {
				checkRefusal(t, err, "click_file", c.given)
				if text != "" {
					t.Errorf("refused, but read %q", text)
				}
				return
			}
			if err != nil || text == "" || echo != c.echo {
				t.Fatalf("got %q echo %v, %v; want the file, echo %v", text, echo, err, c.echo)
			}
		})
	}
	t.Run("a directory", func(t *testing.T) {
		_, _, err := taskPaths(f.task, f.cfg).clickText(&TaskConfig{ClickFile: "local"})
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "click_file" || !strings.Contains(err.Error(), "regular file") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("inline", func(t *testing.T) {
		text, echo, err := taskPaths(f.task, f.cfg).clickText(&TaskConfig{ClickConfig: "x -> y;"})
		if err != nil || text != "x -> y;" || !echo {
			t.Fatalf("got %q %v %v", text, echo, err)
		}
	})
}

func TestReadConfinedSeesSwappedLinks(t *testing.T) {
	f := newPathsFixture(t)
	p := filepath.Join(f.task.TaskDir().LocalDir, "fw.click")
	if b, err := readConfined(real(t, p), 100); err != nil || len(b) == 0 {
		t.Fatalf("the checked file: %q %v", b, err)
	}
	// the path checked, then the file replaced by a link to the marker file
	checked := real(t, p)
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	link(t, filepath.Join(f.outside, "secret"), p)
	if b, err := readConfined(checked, 100); err == nil || bytes.Contains(b, []byte(marker)) {
		t.Fatalf("followed a link swapped in after the check: %q %v", b, err)
	}
	// a directory on the way replaced by a link
	dir := filepath.Join(f.task.TaskDir().LocalDir, "sub")
	mkdir(t, dir)
	write(t, filepath.Join(dir, "secret"), "job's own")
	checked = real(t, filepath.Join(dir, "secret"))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	link(t, f.outside, dir)
	if b, err := readConfined(checked, 100); err == nil || bytes.Contains(b, []byte(marker)) {
		t.Fatalf("followed a directory link swapped in after the check: %q %v", b, err)
	}
	if _, err := readConfined(filepath.Join(f.opt, "pool.elf"), 3); err == nil {
		t.Fatal("a file over the limit was read")
	}
}

func TestFirmwareConfinement(t *testing.T) {
	f := newPathsFixture(t)
	td := f.task.TaskDir()
	write(t, filepath.Join(f.opt, spec.PVHFirmware), "operator firmware")
	write(t, filepath.Join(f.images, spec.PVHFirmware), "image firmware")
	p := taskPaths(f.task, &Config{Kernel: f.cfg.Kernel, ImagePaths: []string{f.images}})
	kernel := func(given string) confined {
		c, err := p.kernel(given)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	str := func(s *string) string {
		if s == nil {
			return "<qemu default>"
		}
		return *s
	}
	for _, c := range []struct {
		name, kernel, requested, want string
	}{
		{"qemu: untouched", "local/vnf.elf", spec.FirmwareQemu, "<qemu default>"},
		{"auto, the operator's kernel: beside it", "", spec.FirmwareAuto,
			filepath.Join(f.opt, spec.PVHFirmware)},
		{"auto, a job kernel without firmware beside it", "local/vnf.elf", spec.FirmwareAuto, "<qemu default>"},
		{"auto, an allowlisted kernel: beside it", filepath.Join(f.images, "vnf.elf"), spec.FirmwareAuto,
			filepath.Join(real(t, f.images), spec.PVHFirmware)},
		{"an operator's path: as given", "local/vnf.elf", "/opt/fw.bin", "/opt/fw.bin"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fw, err := p.firmware("microvm", kernel(c.kernel), c.requested)
			if err != nil || str(fw) != c.want {
				t.Fatalf("got %s, %v; want %s", str(fw), err, c.want)
			}
		})
	}
	t.Run("auto, a job kernel with a real firmware file beside it", func(t *testing.T) {
		write(t, filepath.Join(td.LocalDir, spec.PVHFirmware), "job firmware")
		fw, err := p.firmware("microvm", kernel("local/vnf.elf"), spec.FirmwareAuto)
		if want := real(t, filepath.Join(td.LocalDir, spec.PVHFirmware)); err != nil || str(fw) != want {
			t.Fatalf("got %s, %v; want %s", str(fw), err, want)
		}
	})
	t.Run("auto, a job kernel with a firmware link to a host file beside it", func(t *testing.T) {
		pvh := filepath.Join(td.LocalDir, spec.PVHFirmware)
		_ = os.Remove(pvh)
		link(t, "/etc/shadow", pvh)
		fw, err := p.firmware("microvm", kernel("local/vnf.elf"), spec.FirmwareAuto)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "firmware" || fw != nil ||
			!strings.Contains(err.Error(), "image_paths") {
			t.Fatalf("got %s, %v; want a refusal naming firmware", str(fw), err)
		}
	})
}

func TestConfigRejectedWithholdsFileContent(t *testing.T) {
	parseErr := &control.Error{Code: "config", Line: 1, Col: 1,
		Message: "unknown element class '" + marker + "'"}
	for _, c := range []struct {
		name   string
		err    error
		echo   bool
		want   []string
		marker bool
	}{
		{"the job's own config: the VNF's message", parseErr, true,
			[]string{"click_file", "unknown element class", "line 1, column 1"}, true},
		{"a file outside: class and position only", parseErr, false,
			[]string{"click_file", "config error at line 1, column 1", "withheld"}, false},
		{"wrapped", errors.Join(errors.New("configure"), parseErr), false,
			[]string{"config error at line 1, column 1"}, false},
		{"a protocol error quoting the guest", &control.Error{Code: "protocol", Message: marker}, false,
			[]string{"protocol error", "withheld"}, false},
		{"the channel closed: as it is", &control.Error{Code: "closed", Message: "the VNF has exited"},
			false, []string{"the VNF has exited"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := configRejected("click_file", c.err, c.echo)
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != "click_file" {
				t.Fatalf("not a click_file FieldError: %v", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q missing from %v", w, err)
				}
			}
			if strings.Contains(err.Error(), marker) != c.marker {
				t.Errorf("marker shown = %v, want %v: %v", !c.marker, c.marker, err)
			}
		})
	}
}

const withheldLine = "the VNF's message is withheld: it would quote a configuration this job did not supply"

func TestRedactConsoleLine(t *testing.T) {
	for in, want := range map[string]string{
		"configure: error at line 3 col 17: unknown element class '" + marker + "'\n": "configure: error at line 3 col 17 (" + withheldLine + ")\n",
		"configure: error at line 1 col 1: unexpected byte 0x" + marker:               "configure: error at line 1 col 1 (" + withheldLine + ")",
		"configure: ok, 4 elements, slots 1024, 52 us\n":                              "configure: ok, 4 elements, slots 1024, 52 us\n",
		"fluidvim-vnf 0.1 fw: 2 NICs, clock kvmclock, ready in 900 us\n":              "fluidvim-vnf 0.1 fw: 2 NICs, clock kvmclock, ready in 900 us\n",
	} {
		if got := string(redactConsoleLine([]byte(in))); got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}

func TestImagePathsValidation(t *testing.T) {
	if err := checkImagePaths([]string{"/srv/vnf", "images"}); err == nil ||
		err.(*FieldError).Field != "image_paths[1]" {
		t.Fatalf("a relative image_paths entry: %v", err)
	}
	if err := checkImagePaths([]string{"/srv/vnf"}); err != nil {
		t.Fatal(err)
	}
}
