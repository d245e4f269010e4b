// Package ipvsvm tests the ipvs script against real IPVS: the machines svcgen runs on
// have a kernel without IPVS and dummy links, so the test boots a stock Debian cloud
// kernel (which has both) under qemu's software emulation, with an initramfs made of
// busybox, the kernel's modules, ipvsadm, ipset, iptables, iproute2 and this package's
// own test binary, built statically. Inside, the Guest tests run as root in the
// guest's own kernel (see guest_test.go); outside, TestIPVSInQEMU builds all that and
// reads the result off the serial console.
//
// Everything comes from Debian's packages: the kernel .deb is fetched with apt-get
// download and unpacked with dpkg -x into .cache/ipvsvm (git-ignored), so the second
// run reuses it. Where qemu or the tools are missing the test skips, except under
// CI=true, where it fails.
package ipvsvm

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// guestEnv marks the test binary's run inside the guest.
const guestEnv = "SVCGEN_IPVS_GUEST"

// kernelPackage is Debian's meta package for the cloud kernel, which has IPVS, every
// scheduler, ipset, dummy and veth as modules and boots fast.
const kernelPackage = "linux-image-cloud-amd64"

// guestModules are loaded at boot (with their dependencies); schedulers other than
// rr load on demand through modprobe, like on a node.
var guestModules = []string{
	"ip_vs", "ip_vs_rr", "ip_vs_wrr", "ip_vs_lc", "ip_vs_wlc", "ip_vs_lblc", "ip_vs_lblcr", "ip_vs_dh",
	"ip_vs_sh", "ip_vs_sed", "ip_vs_nq", "ip_vs_mh", "ip_vs_fo", "ip_vs_ovf",
	"dummy", "veth", "ip_set", "ip_set_hash_ip", "ip_set_hash_ipport", "ip_set_hash_ipportip",
	"ip_set_hash_ipportnet", "ip_set_bitmap_port", "xt_set", "nf_tables", "nft_compat", "nft_chain_nat",
	"xt_comment", "xt_mark", "xt_MASQUERADE", "xt_conntrack", "xt_addrtype", "xt_physdev", "xt_ipvs",
	"xt_nat", "ipt_REJECT", "ip6t_REJECT", "nf_reject_ipv4",
}

// guestTools are copied with the shared libraries ldd lists.
// dash runs the script, as /bin/sh does on Debian nodes (busybox's shell would run
// its own ip applet instead of iproute2's).
var guestTools = []string{"ipvsadm", "ipset", "xtables-nft-multi", "ip", "dash"}

// requireQEMU finds what the harness needs, or skips (fails under CI).
func requireQEMU(t *testing.T) map[string]string {
	t.Helper()
	if os.Getenv(guestEnv) != "" {
		t.Skip("inside the guest: the Guest tests run here")
	}
	paths := map[string]string{}
	var missing []string
	for _, tool := range append([]string{"qemu-system-x86_64", "busybox", "apt-get", "apt-cache", "dpkg", "depmod", "ldd", "go"}, guestTools...) {
		p, err := exec.LookPath(tool)
		if err != nil {
			p, err = exec.LookPath("/usr/sbin/" + tool)
		}
		if err != nil {
			p, err = exec.LookPath("/sbin/" + tool)
		}
		if err != nil {
			missing = append(missing, tool)
			continue
		}
		paths[tool] = p
	}
	if len(missing) > 0 {
		msg := "qemu IPVS test needs " + strings.Join(missing, ", ") + " (./test.sh installs qemu-system-x86, busybox-static, kmod, ipvsadm, ipset, iptables, iproute2 as root)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return paths
}

func TestIPVSInQEMU(t *testing.T) {
	tools := requireQEMU(t)
	cache, err := filepath.Abs("../../.cache/ipvsvm")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	kernel, modules := fetchKernel(t, cache)
	t.Logf("kernel %s ready after %v", filepath.Base(kernel), time.Since(start).Round(time.Millisecond))
	work := t.TempDir()
	root := filepath.Join(work, "root")
	buildRoot(t, root, modules, tools)
	buildGuestBinary(t, filepath.Join(root, "guest.test"), tools["go"])
	initrd := filepath.Join(work, "initrd.gz")
	pack(t, root, initrd, tools["busybox"])
	t.Logf("initramfs ready after %v", time.Since(start).Round(time.Millisecond))
	out := boot(t, tools["qemu-system-x86_64"], kernel, initrd)
	t.Logf("guest finished after %v", time.Since(start).Round(time.Millisecond))
	report(t, out)
}

// fetchKernel downloads and unpacks the cloud kernel once; it returns the vmlinuz
// path and the modules folder.
func fetchKernel(t *testing.T, cache string) (vmlinuz, modules string) {
	t.Helper()
	dep := run(t, "", "apt-cache", "depends", kernelPackage)
	m := regexp.MustCompile(`Depends: (linux-image-[0-9][^\s]*)`).FindStringSubmatch(dep)
	if m == nil {
		t.Fatalf("apt-cache depends %s names no versioned kernel (run apt-get update):\n%s", kernelPackage, dep)
	}
	pkg := m[1]
	version := strings.TrimPrefix(pkg, "linux-image-")
	dir := filepath.Join(cache, pkg)
	vmlinuz = filepath.Join(dir, "boot", "vmlinuz-"+version)
	modules = filepath.Join(dir, "lib", "modules", version)
	if _, err := os.Stat(filepath.Join(modules, "modules.dep")); err == nil {
		return vmlinuz, modules
	}
	dl := filepath.Join(cache, "download")
	if err := os.MkdirAll(dl, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, dl, "apt-get", "download", "-q", pkg)
	debs, _ := filepath.Glob(filepath.Join(dl, pkg+"_*.deb"))
	if len(debs) == 0 {
		t.Fatalf("apt-get download %s left no .deb in %s", pkg, dl)
	}
	tmp := dir + ".tmp"
	os.RemoveAll(tmp)
	run(t, "", "dpkg", "-x", debs[0], tmp)
	run(t, "", "depmod", "-b", tmp, version)
	if err := os.Rename(tmp, dir); err != nil {
		t.Fatal(err)
	}
	os.Remove(debs[0])
	return vmlinuz, modules
}

// buildRoot lays out the initramfs: busybox and its applets, the modules the guest
// loads (with what they depend on), the tools with their libraries, and /init.
func buildRoot(t *testing.T, root, modules string, tools map[string]string) {
	t.Helper()
	for _, d := range []string{"bin", "sbin", "etc", "proc", "sys", "dev", "tmp", "run", "var"} {
		mkdir(t, filepath.Join(root, d))
	}
	copyWithLibs(t, root, tools["busybox"], filepath.Join(root, "bin", "busybox"))
	applets := run(t, "", tools["busybox"], "--list")
	for _, a := range strings.Fields(applets) {
		if a != "busybox" {
			os.Symlink("busybox", filepath.Join(root, "bin", a))
		}
	}
	os.Symlink("../bin/busybox", filepath.Join(root, "sbin", "modprobe")) // the kernel's request_module path
	copyModules(t, root, modules)
	for _, tool := range guestTools {
		copyWithLibs(t, root, tools[tool], filepath.Join(root, "bin", tool))
	}
	for _, name := range []string{"iptables", "iptables-restore", "iptables-save", "ip6tables", "ip6tables-restore", "ip6tables-save"} {
		os.Symlink("xtables-nft-multi", filepath.Join(root, "bin", name))
	}
	xt := "/usr/lib/x86_64-linux-gnu/xtables"
	plugins, _ := filepath.Glob(filepath.Join(xt, "*.so"))
	for _, p := range plugins {
		copyWithLibs(t, root, p, filepath.Join(root, p))
	}
	for _, f := range []string{"/etc/protocols", "/etc/services"} {
		copyFile(t, f, filepath.Join(root, f), 0o644)
	}
	var loads []string
	for _, m := range guestModules {
		loads = append(loads, "modprobe "+m+" || echo 'svcgen-guest: modprobe "+m+" failed'")
	}
	initScript := `#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs run /run
mount -t tmpfs tmp /tmp
ln -s /run /var/run
export PATH=/bin:/sbin
` + strings.Join(loads, "\n") + `
ip link set lo up
echo "svcgen-guest: start"
` + guestEnv + `=1 /guest.test -test.v -test.run '^TestGuest' -test.timeout 540s > /tmp/out 2>&1
echo "svcgen-guest: exit=$?"
cat /tmp/out
echo "svcgen-guest: end"
poweroff -f
`
	if err := os.WriteFile(filepath.Join(root, "init"), []byte(initScript), 0o755); err != nil {
		t.Fatal(err)
	}
}

// copyModules copies the guest's modules and their dependencies, then writes
// modules.dep for that subset.
func copyModules(t *testing.T, root, modules string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(modules, "modules.dep"))
	if err != nil {
		t.Fatal(err)
	}
	deps := map[string][]string{} // module name -> its file and dependency files
	for _, line := range strings.Split(string(data), "\n") {
		file, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(file), ".ko")
		name = strings.TrimSuffix(name, ".ko.xz")
		deps[name] = append([]string{file}, strings.Fields(rest)...)
	}
	version := filepath.Base(modules)
	dst := filepath.Join(root, "lib", "modules", version)
	var files []string
	for _, m := range guestModules {
		fs, ok := deps[m]
		if !ok {
			t.Fatalf("module %s is not in %s", m, modules)
		}
		for _, f := range fs {
			if !slices.Contains(files, f) {
				files = append(files, f)
			}
		}
	}
	for _, f := range files {
		copyFile(t, filepath.Join(modules, f), filepath.Join(dst, f), 0o644)
	}
	for _, f := range []string{"modules.order", "modules.builtin", "modules.builtin.modinfo"} {
		if _, err := os.Stat(filepath.Join(modules, f)); err == nil {
			copyFile(t, filepath.Join(modules, f), filepath.Join(dst, f), 0o644)
		}
	}
	run(t, "", "depmod", "-b", root, version)
}

// copyWithLibs copies a binary and the shared libraries ldd lists for it.
func copyWithLibs(t *testing.T, root, src, dst string) {
	t.Helper()
	copyFile(t, src, dst, 0o755)
	out, _ := exec.Command("ldd", src).Output()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		var lib string
		switch {
		case len(f) >= 3 && f[1] == "=>":
			lib = f[2]
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			lib = f[0]
		}
		if lib == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, lib)); err != nil {
			copyFile(t, lib, filepath.Join(root, lib), 0o755)
		}
	}
}

// buildGuestBinary builds this package's tests as a static binary for the guest.
func buildGuestBinary(t *testing.T, out, goTool string) {
	t.Helper()
	cmd := exec.Command(goTool, "test", "-c", "-o", out, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the guest test binary: %v\n%s", err, b)
	}
}

// pack writes the root as a gzip'd newc cpio archive.
func pack(t *testing.T, root, out, busybox string) {
	t.Helper()
	var list bytes.Buffer
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		list.WriteString(rel + "\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cpio := exec.Command(busybox, "sh", "-c", busybox+" cpio -o -H newc 2>/dev/null | "+busybox+" gzip -1")
	cpio.Dir = root
	cpio.Stdin = &list
	cpio.Stdout = f
	var stderr bytes.Buffer
	cpio.Stderr = &stderr
	if err := cpio.Run(); err != nil {
		t.Fatalf("cpio: %v %s", err, stderr.String())
	}
}

// boot runs the guest under software emulation, bounded in time, and returns its
// serial console.
func boot(t *testing.T, qemu, kernel, initrd string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu, "-m", "1024", "-smp", "1", "-nographic", "-no-reboot",
		"-accel", "tcg", "-kernel", kernel, "-initrd", initrd,
		"-append", "console=ttyS0 panic=-1 quiet")
	cmd.Stdin = nil
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("the guest did not power off within 6 minutes; console:\n%s", tail(out.String(), 200))
	}
	if err != nil {
		t.Fatalf("qemu: %v; console:\n%s", err, tail(out.String(), 200))
	}
	return out.String()
}

// report fails the host test with the guest's own output when a guest test failed.
func report(t *testing.T, console string) {
	t.Helper()
	var exit string
	var inTests bool
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(console))
	for sc.Scan() {
		l := strings.TrimRight(sc.Text(), "\r")
		switch {
		case strings.HasPrefix(l, "svcgen-guest: exit="):
			exit = strings.TrimPrefix(l, "svcgen-guest: exit=")
			inTests = true
		case l == "svcgen-guest: end":
			inTests = false
		case strings.HasPrefix(l, "svcgen-guest: "):
			t.Error(l)
		case inTests:
			lines = append(lines, l)
		}
	}
	out := strings.Join(lines, "\n")
	if exit == "" {
		t.Fatalf("the guest never ran its tests; console:\n%s", tail(console, 100))
	}
	if exit != "0" || !strings.Contains(out, "--- PASS: TestGuest") || strings.Contains(out, "--- SKIP") {
		t.Fatalf("guest tests failed (exit %s):\n%s", exit, out)
	}
	t.Logf("guest tests:\n%s", out)
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func mkdir(t *testing.T, d string) {
	t.Helper()
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	mkdir(t, filepath.Dir(dst))
	os.Remove(dst) // a busybox applet link of the same name: replace it, not busybox
	if err := os.WriteFile(dst, data, mode); err != nil {
		t.Fatal(fmt.Errorf("copy %s: %w", src, err))
	}
}
