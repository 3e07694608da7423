package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/internal/messages"
)

// pattern is 4096 bytes of a repeated text: what a test writes to the
// device to read it back.
var pattern = bytes.Repeat([]byte("fault-matrix"), 4096/12+1)[:4096]

// newWorker starts a GPU worker with no budget (only the device refuses
// allocations) on a traced simulated device: new-worker [capacity=SIZE].
func (r *scriptRig) newWorker(t *testing.T, td *datadriven.TestData) string {
	r.w = simWorker(t, r.start(t, td))
	return "ok\n"
}

// ptrArg reads key=LABEL, the label of an allocation of this script.
func (r *scriptRig) ptrArg(t *testing.T, td *datadriven.TestData, key string) device.DevicePtr {
	var label string
	td.ScanArgs(t, key, &label)
	p, ok := r.ptrs[label]
	if !ok {
		td.Fatalf(t, "%s=%s: no allocation of that label", key, label)
	}
	return p
}

// alloc allocates: alloc owner=O label=L bytes=SIZE. Later commands name
// the allocation by its label.
func (r *scriptRig) alloc(t *testing.T, td *datadriven.TestData) string {
	var owner, label string
	td.ScanArgs(t, "owner", &owner)
	td.ScanArgs(t, "label", &label)
	p, err := r.w.Alloc(context.Background(), owner, label, sizeArg(t, td, "bytes"))
	if err == nil {
		r.ptrs[label] = p
	}
	return result(err, "")
}

// allocBatch allocates all or nothing, one item per label, each of the
// same size: alloc-batch owner=O labels=(L1, L2, ...) bytes=SIZE.
func (r *scriptRig) allocBatch(t *testing.T, td *datadriven.TestData) string {
	var owner string
	var labels []string
	td.ScanArgs(t, "owner", &owner)
	td.ScanArgs(t, "labels", &labels)
	n := sizeArg(t, td, "bytes")
	items := make([]messages.AllocItem, len(labels))
	for i, l := range labels {
		items[i] = messages.AllocItem{Label: l, Bytes: n}
	}
	ptrs, _, err := r.w.AllocBatch(context.Background(), owner, items, nil)
	if err == nil {
		for i, l := range labels {
			r.ptrs[l] = ptrs[i]
		}
	}
	return result(err, "")
}

// free frees an allocation: free owner=O ptr=L.
func (r *scriptRig) free(t *testing.T, td *datadriven.TestData) string {
	var owner string
	td.ScanArgs(t, "owner", &owner)
	return result(r.w.Free(context.Background(), owner, r.ptrArg(t, td, "ptr")), "")
}

// memset sets bytes: memset ptr=L value=N bytes=SIZE (N in Go syntax:
// 90, 0x5a).
func (r *scriptRig) memset(t *testing.T, td *datadriven.TestData) string {
	var s string
	td.ScanArgs(t, "value", &s)
	value, err := strconv.ParseUint(s, 0, 8)
	if err != nil {
		td.Fatalf(t, "memset: value=%s: %v", s, err)
	}
	return result(r.w.Memset(context.Background(), r.ptrArg(t, td, "ptr"), byte(value), sizeArg(t, td, "bytes")), "")
}

// copyHtoD copies the 4096-byte pattern to the device: copy-h2d ptr=L.
func (r *scriptRig) copyHtoD(t *testing.T, td *datadriven.TestData) string {
	return result(r.w.CopyHtoD(context.Background(), r.ptrArg(t, td, "ptr"), pattern), "")
}

// copyDtoH reads bytes back and says what they are: copy-d2h ptr=L
// bytes=SIZE.
func (r *scriptRig) copyDtoH(t *testing.T, td *datadriven.TestData) string {
	got, err := r.w.CopyDtoH(context.Background(), r.ptrArg(t, td, "ptr"), sizeArg(t, td, "bytes"))
	return result(err, "read "+contents(got))
}

// copyDtoD copies on the device: copy-d2d dst=L src=L bytes=SIZE.
func (r *scriptRig) copyDtoD(t *testing.T, td *datadriven.TestData) string {
	return result(r.w.CopyDtoD(context.Background(), r.ptrArg(t, td, "dst"), r.ptrArg(t, td, "src"), sizeArg(t, td, "bytes")), "")
}

// probe checks that the worker still serves: it allocates 4096 bytes for
// the owner probe, writes the pattern, reads it back and frees them.
func (r *scriptRig) probe(*testing.T, *datadriven.TestData) string {
	ctx := context.Background()
	p, err := r.w.Alloc(ctx, "probe", "probe", int64(len(pattern)))
	if err != nil {
		return result(err, "")
	}
	err = r.w.CopyHtoD(ctx, p, pattern)
	var got []byte
	if err == nil {
		got, err = r.w.CopyDtoH(ctx, p, int64(len(pattern)))
	}
	if err == nil && !bytes.Equal(got, pattern) {
		err = errors.New("the probe read back " + contents(got))
	}
	return result(errors.Join(err, r.w.Free(ctx, "probe", p)), "wrote and read back "+size(int64(len(pattern))))
}

// contents says what bytes read back hold: one repeated value, the
// pattern, or neither.
func contents(b []byte) string {
	switch {
	case len(b) == 0:
		return "nothing"
	case bytes.Count(b, b[:1]) == len(b):
		return fmt.Sprintf("%s of %#02x", size(int64(len(b))), b[0])
	case bytes.Equal(b, pattern[:min(len(b), len(pattern))]):
		return size(int64(len(b))) + " of the pattern"
	}
	return size(int64(len(b))) + " of mixed bytes"
}
