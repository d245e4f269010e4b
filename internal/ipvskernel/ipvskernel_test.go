//go:build linux

package ipvskernel

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// On a kernel without the ip_vs module (the machines svcgen's CI runs on) Check must
// say so, and name the fix; the qemu guest of e2e/ipvsvm checks the other answer.
func TestCheckWithoutIPVS(t *testing.T) {
	if _, err := os.Stat("/sys/module/ip_vs"); err == nil {
		t.Skip("this kernel has ip_vs loaded; e2e/ipvsvm covers that case")
	}
	err := Check()
	if !errors.Is(err, ErrMissing) {
		t.Fatalf("Check() = %v, want ErrMissing", err)
	}
	if !strings.Contains(err.Error(), "modprobe ip_vs") {
		t.Errorf("error %q does not say how to load IPVS", err)
	}
}
