package apply

import (
	"fmt"

	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
)

// stateAs is from as a backend's own kind of state S; mode names the backend in the
// error. A state another backend read is the caller's mistake.
func stateAs[S State](mode string, from State) (S, error) {
	st, ok := from.(S)
	if !ok {
		return st, fmt.Errorf("%s: a state of another backend", mode)
	}
	return st, nil
}

// sameFamily checks that the service map is for the family of the backend named
// name (ipv6: an IPv6 backend).
func sameFamily(name string, ipv6 bool, sm *ir.ServiceMap) error {
	if (sm.Family == model.IPv6) != ipv6 {
		return fmt.Errorf("%s: the service map is for %s", name, sm.Family)
	}
	return nil
}
