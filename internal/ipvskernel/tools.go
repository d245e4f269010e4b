package ipvskernel

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/svcgen/svcgen/ipvs/syntax"
)

// IPSetTool is the kernel's ipsets through the ipset tool.
type IPSetTool struct {
	Run Runner
}

func (t IPSetTool) Save(ctx context.Context) ([]*syntax.Set, error) {
	out, err := t.Run(ctx, nil, "ipset", "save")
	if err != nil {
		return nil, err
	}
	return syntax.ParseSetsBytes("ipset save", out)
}

func (t IPSetTool) Restore(ctx context.Context, input []byte) error {
	_, err := t.Run(ctx, input, "ipset", "restore", "-exist")
	return err
}

// ProcSysctls is the kernel's settings as files under Root (/proc/sys).
type ProcSysctls struct {
	Root string
}

func (p ProcSysctls) path(name string) string {
	return filepath.Join(p.Root, strings.ReplaceAll(name, ".", "/"))
}

func (p ProcSysctls) Get(name string) (string, bool, error) {
	v, err := os.ReadFile(p.path(name))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", false, nil
	case err != nil:
		return "", false, err
	}
	return strings.TrimSpace(string(v)), true, nil
}

func (p ProcSysctls) Set(name, value string) error {
	return os.WriteFile(p.path(name), []byte(value), 0o644)
}
