package apply

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Lock is a lock file that serialises applies to one network namespace: an exclusive
// flock(2), so a process that dies lets go of it at once. A second apply waits for the
// first, at most Wait.
type Lock struct {
	Path string
	Wait time.Duration
}

// DefaultLockPath is the lock file of the network namespace this process runs in:
// /run/svcgen/apply-net-<inode>.lock, so applies in different namespaces do not wait
// for each other.
func DefaultLockPath() string {
	name := "apply.lock"
	if link, err := os.Readlink("/proc/self/ns/net"); err == nil {
		// "net:[4026531840]"
		inode := strings.TrimSuffix(strings.TrimPrefix(link, "net:["), "]")
		if _, err := strconv.ParseUint(inode, 10, 64); err == nil {
			name = "apply-net-" + inode + ".lock"
		}
	}
	return filepath.Join("/run/svcgen", name)
}

// Acquire takes the lock, waiting at most l.Wait, and returns its release.
func (l *Lock) Acquire(ctx context.Context) (release func(), err error) {
	if err := os.MkdirAll(filepath.Dir(l.Path), 0o755); err != nil {
		return nil, fmt.Errorf("lock file: %w", err)
	}
	f, err := os.OpenFile(l.Path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock file: %w", err)
	}
	deadline := time.Now().Add(l.Wait)
	for delay := 5 * time.Millisecond; ; delay = min(2*delay, 200*time.Millisecond) {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if err != unix.EWOULDBLOCK && err != unix.EINTR {
			f.Close()
			return nil, fmt.Errorf("lock file %s: %w", l.Path, err)
		}
		if time.Now().After(deadline) {
			holder := ""
			if b, err := os.ReadFile(l.Path); err == nil && len(b) > 0 {
				holder = " (held by pid " + strings.TrimSpace(string(b)) + ")"
			}
			f.Close()
			return nil, fmt.Errorf("another svcgen apply holds %s%s; gave up after %v", l.Path, holder, l.Wait)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(delay):
		}
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() {
		f.Truncate(0)
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}
