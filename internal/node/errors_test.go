package node

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/internal/nodepb"
)

// TestEveryErrorCodeRoundTrips: every code of nodepb.ErrorCode but
// UNSPECIFIED and INTERNAL has a sentinel of its own, an error wrapping it
// goes on the wire under that code (also when it wraps
// gpuarena.ErrInvalidValue as well), and the client's *RemoteError matches
// it again; an error of no sentinel goes as INTERNAL.
func TestEveryErrorCodeRoundTrips(t *testing.T) {
	for v, name := range nodepb.ErrorCode_name {
		c := nodepb.ErrorCode(v)
		if c == nodepb.ErrorCode_ERROR_CODE_UNSPECIFIED || c == nodepb.ErrorCode_ERROR_CODE_INTERNAL {
			continue
		}
		sentinel := codeSentinel(c)
		if sentinel == ErrInternal {
			t.Errorf("%s: no sentinel of its own", name)
			continue
		}
		err := fmt.Errorf("asked: %w", sentinel)
		if c != nodepb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT {
			err = fmt.Errorf("%w: %w", err, gpuarena.ErrInvalidValue)
		}
		w := wireError(err)
		if w.GetCode() != c || w.GetMessage() != err.Error() {
			t.Errorf("%s: on the wire as %v %q", name, w.GetCode(), w.GetMessage())
		}
		if got := remoteError("node", w); !errors.Is(got, sentinel) {
			t.Errorf("%s: the client's %v does not match %v", name, got, sentinel)
		}
	}
	other := wireError(errors.New("disk on fire"))
	if other.GetCode() != nodepb.ErrorCode_ERROR_CODE_INTERNAL || !errors.Is(remoteError("node", other), ErrInternal) {
		t.Errorf("an error of no sentinel: %v, want ERROR_CODE_INTERNAL matching ErrInternal", other)
	}
}
