// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

// Where a task's files may come from. The client runs this plugin as root, and a job names files
// in its task config: `kernel` (QEMU boots it), `click_file` (the plugin reads it and sends it
// to the VNF, whose parse errors quote its tokens) and, through the kernel, the firmware beside
// it ("auto": fluidvim-pvh.bin in the kernel's directory). A job submitter is not a host
// administrator, so each of these must be a file
//
//   - inside the task's own directories: the task directory (TaskDir().Dir: local/, secrets/,
//     tmp/; a relative path is relative to it) or the allocation's shared directory
//     (TaskDir().SharedAllocDir, alloc/), minus Nomad's private/ directory; or
//   - under a directory the operator listed in the plugin config's image_paths (empty by
//     default), as Nomad's qemu driver does with its own image_paths; or
//   - one of the operator's own files: the plugin-wide kernel and the warm_pool kernels (the
//     firmware the operator names in the plugin config is the operator's too),
//
// after every symlink is resolved (a link in the task directory to /etc/shadow is /etc/shadow).
// A refusal names the field, the path as the job gave it and the fix, never the file's content,
// and it says the same for a path that does not exist as for one outside (no probing of the
// host's files).
//
// Echo: what the VNF says about a configuration it rejects quotes the configuration. That is
// shown (task events, the task's stderr and console log, `nomad alloc signal`) only when the
// configuration is the job's own: inline (click_config), or a click_file inside the task's
// directories other than secrets/ (which Nomad keeps from `nomad alloc fs` too). For a file
// under image_paths or in secrets/, a rejection reports the error class and the line and column
// only (configRejected, redactConsoleLine).

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/hashicorp/nomad/client/allocdir"
	"github.com/hashicorp/nomad/plugins/drivers"

	"github.com/fluidvim/fluidvim/nomad_driver/control"
	"github.com/fluidvim/fluidvim/nomad_driver/spec"
)

// pathPolicy is where one task's files may come from (see the file comment).
type pathPolicy struct {
	taskDir    string   // relative paths are relative to it
	jobRoots   []string // the job's own directories: the task dir, the shared alloc dir
	private    string   // inside the task dir, Nomad's (refused)
	secrets    string   // inside the task dir, the job's, never echoed
	imagePaths []string // the operator's allowlist
	// defaultKernel: the plugin-wide kernel (a task without `kernel` boots it); "" = none
	defaultKernel string
	// trustedKernels: the operator's kernel files, allowed wherever they are
	trustedKernels []string
}

// taskPaths is the policy of the task cfg under the plugin config c.
func taskPaths(cfg *drivers.TaskConfig, c *Config) *pathPolicy {
	td := cfg.TaskDir() // (it leaves PrivateDir unset)
	p := &pathPolicy{taskDir: td.Dir, jobRoots: []string{td.Dir, td.SharedAllocDir},
		private: filepath.Join(td.Dir, allocdir.TaskPrivate), secrets: td.SecretsDir, imagePaths: c.ImagePaths,
		defaultKernel: c.Kernel}
	if c.Kernel != "" {
		p.trustedKernels = append(p.trustedKernels, c.Kernel)
	}
	for _, w := range c.WarmPool {
		p.trustedKernels = append(p.trustedKernels, w.Kernel)
	}
	return p
}

// checkImagePaths validates the plugin config's image_paths (absolute directories).
func checkImagePaths(paths []string) error {
	for i, p := range paths {
		if !filepath.IsAbs(p) {
			return fieldErr(fmt.Sprintf("image_paths[%d]", i), "%q must be an absolute path", p)
		}
	}
	return nil
}

// confined is a file a task may use.
type confined struct {
	Path    string // the file, symlinks resolved (an operator's file: as configured)
	Trusted bool   // one of the operator's files
	Echo    bool   // the job's own content: may be quoted in error messages
}

// within is whether p is root or below it (both clean, absolute, symlinks resolved).
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// realDir is root with its symlinks resolved ("" when it does not exist).
func realDir(root string) string {
	r, err := filepath.EvalSymlinks(root)
	if err != nil {
		return ""
	}
	return r
}

func (p *pathPolicy) abs(given string) string {
	if filepath.IsAbs(given) {
		return filepath.Clean(given)
	}
	return filepath.Join(p.taskDir, given)
}

// refused is the error of a path a task may not use (or that does not exist: the same words, so
// that a job cannot tell the host's files apart).
func (p *pathPolicy) refused(field, given string) error {
	allow := "image_paths is empty"
	if len(p.imagePaths) != 0 {
		allow = "image_paths: " + strings.Join(p.imagePaths, ", ")
	}
	return fieldErr(field, "%q is not a file inside the task directory or under the plugin's "+
		"image_paths (%s; symlinks resolved first): copy it into the task dir with an artifact "+
		"or template block, or have the operator add its directory to image_paths", given, allow)
}

// resolve checks the file a task names in field (given as the job wrote it); trusted are
// operator files allowed as they are (nil for click_file).
func (p *pathPolicy) resolve(field, given string, trusted []string) (confined, error) {
	if given == "" {
		return confined{}, fieldErr(field, "empty path")
	}
	joined := p.abs(given)
	for _, t := range trusted {
		if filepath.Clean(t) == joined {
			return confined{Path: joined, Trusted: true}, nil
		}
	}
	real, err := filepath.EvalSymlinks(joined)
	if err != nil {
		return confined{}, p.refused(field, given)
	}
	for _, t := range trusted {
		if rt, err := filepath.EvalSymlinks(t); err == nil && rt == real {
			return confined{Path: real, Trusted: true}, nil
		}
	}
	c := confined{Path: real}
	switch {
	case p.inside(real, p.jobRoots...):
		if p.inside(real, p.private) {
			return confined{}, fieldErr(field, "%q is in the task's private/ directory, which holds "+
				"Nomad's own files, not the job's: copy it into the task dir's local/ with an "+
				"artifact or template block, or have the operator add its directory to image_paths", given)
		}
		c.Echo = !p.inside(real, p.secrets)
	case p.inside(real, p.imagePaths...):
	default:
		return confined{}, p.refused(field, given)
	}
	st, err := os.Stat(real)
	if err != nil || !st.Mode().IsRegular() {
		return confined{}, fieldErr(field, "%q is not a regular file", given)
	}
	return c, nil
}

// inside is whether the resolved path real is within one of roots (each resolved too).
func (p *pathPolicy) inside(real string, roots ...string) bool {
	for _, r := range roots {
		if r == "" {
			continue
		}
		if rr := realDir(r); rr != "" && within(rr, real) {
			return true
		}
	}
	return false
}

// kernel is the kernel a task boots: its `kernel` (confined) or the plugin-wide one.
func (p *pathPolicy) kernel(given string) (confined, error) {
	if given == "" {
		if p.defaultKernel == "" {
			return confined{}, fieldErr("kernel", "required: the plugin config names no kernel")
		}
		given = p.defaultKernel
	}
	c, err := p.resolve("kernel", given, p.trustedKernels)
	if err != nil {
		return c, err
	}
	if c.Trusted {
		if st, err := os.Stat(c.Path); err != nil || !st.Mode().IsRegular() {
			return c, fieldErr("kernel", "%s does not exist or is not a file: build it with "+
				"`make -C unikernel` or set kernel", c.Path)
		}
	}
	return c, nil
}

// firmware is the microvm's -bios for kernel under the plugin's firmware setting (spec.
// FirmwareFor). The operator's choices stand: an explicit path, "qemu", and "auto" beside an
// operator kernel. "auto" beside a job's kernel finds fluidvim-pvh.bin in the job's (or an
// image_paths) directory: that file is confined like the kernel.
func (p *pathPolicy) firmware(machine string, kernel confined, requested string) (*string, error) {
	fw := spec.FirmwareFor(machine, kernel.Path, requested, fileExists)
	if fw == nil || requested != spec.FirmwareAuto || kernel.Trusted {
		return fw, nil
	}
	c, err := p.resolve("firmware", *fw, nil)
	if err != nil {
		return nil, fieldErr("firmware", "%s beside the kernel is not allowed: %v (or set "+
			"firmware = %q in the plugin config)", spec.PVHFirmware, err.(*FieldError).Message,
			spec.FirmwareQemu)
	}
	return &c.Path, nil
}

// clickText is the configuration a task sends: inline, or read from click_file (confined;
// relative to the task directory). echo: the VNF's messages about it may be shown (the file
// comment).
func (p *pathPolicy) clickText(tc *TaskConfig) (text string, echo bool, err error) {
	if tc.ClickFile == "" {
		return tc.ClickConfig, true, nil
	}
	c, err := p.resolve("click_file", tc.ClickFile, nil)
	if err != nil {
		return "", false, err
	}
	b, err := readConfined(c.Path, spec.MaxClickConfig)
	if err != nil {
		return "", false, fieldErr("click_file", "%q: %v", tc.ClickFile, err)
	}
	return string(b), c.Echo, nil
}

// readConfined reads the file at path (a resolved path: no symlink on the way) and checks that
// what it opened is that file, so that a link swapped in after the check is not followed; at
// most limit bytes.
func readConfined(path string, limit int) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, errors.New("cannot be opened (it changed while it was checked?)")
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, errors.New("is not a regular file")
	}
	if got, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd()))); err != nil || got != path {
		return nil, errors.New("changed while it was checked (a symlink on its path)")
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, errors.New("cannot be read")
	}
	if len(b) > limit {
		return nil, fmt.Errorf("longer than %d bytes", limit)
	}
	return b, nil
}

// configRejected is the error of a configuration the VNF (or the channel) refused, as a task
// may see it (vnfMessage).
func configRejected(field string, err error, echo bool) error {
	return fieldErr(field, "the VNF rejected the configuration: %v", vnfMessage(err, echo))
}

// vnfMessage is err, from sending a configuration, as a task may see it. echo: the
// configuration is the job's own, err is shown whole. Otherwise the message of anything the
// VNF said is withheld (it quotes the configuration) and only its error class and position are
// given; the channel's own failures ("closed", "timeout") and the plugin's errors carry no
// content and stay as they are.
func vnfMessage(err error, echo bool) error {
	var ce *control.Error
	if echo || !errors.As(err, &ce) || ce.Code == "closed" || ce.Code == "timeout" {
		return err
	}
	where := ""
	if ce.Line != 0 {
		where = fmt.Sprintf(" at line %d, column %d", ce.Line, ce.Col)
	}
	if ce.Field != "" {
		where += " (field " + ce.Field + ")"
	}
	return fmt.Errorf("%s error%s (the VNF's message is withheld: the file is outside the task "+
		"directory or in its secrets/, and its content is not shown)", ce.Code, where)
}

// consoleErrRE is the console log line of a rejected configuration (unikernel/src/control.c
// op_configure: "configure: error at line L col C: MESSAGE").
var consoleErrRE = regexp.MustCompile(`^configure: error at line (\d+) col (\d+): `)

// consoleConfigError is the VNF's message in a console line about a rejected configuration.
func consoleConfigError(line []byte) (string, bool) {
	m := consoleErrRE.FindIndex(line)
	if m == nil {
		return "", false
	}
	return strings.TrimSuffix(string(line[m[1]:]), "\n"), true
}

// redactConsoleLine is a console log line as the task's stdout may show it: a rejected
// configuration's message is withheld (the file comment); other lines are unchanged.
func redactConsoleLine(line []byte) []byte {
	if !consoleErrRE.Match(line) {
		return line
	}
	m := consoleErrRE.FindSubmatch(line)
	nl := ""
	if len(line) != 0 && line[len(line)-1] == '\n' {
		nl = "\n"
	}
	return []byte(fmt.Sprintf("configure: error at line %s col %s (the VNF's message is withheld: it "+
		"would quote a configuration this job did not supply)%s", m[1], m[2], nl))
}
