package checkpoint

import (
	"bytes"
	"testing"
)

func TestZerosChecksum(t *testing.T) {
	zeros := make([]byte, 1<<20+7)
	for _, n := range []int{0, 1, 2, 3, 7, 8, 255, 256, 4095, 65537, 1<<20 + 7} {
		h := NewHash()
		_, _ = h.Write(zeros[:n])
		if got, want := zerosChecksum(int64(n)), h.Sum32(); got != want {
			t.Errorf("zerosChecksum(%d) = %#x, want %#x", n, got, want)
		}
	}
}

// TestWriteZeros writes a checkpoint of zeros: it opens like any other,
// and every tensor reads back as zeros with the manifest's checksum.
func TestWriteZeros(t *testing.T) {
	dir := t.TempDir()
	specs := []TensorSpec{
		{Name: "a.weight", DType: BF16, Shape: []int64{1024, 512}},
		{Name: "b.weight", DType: F8E4M3, Shape: []int64{2048, 1024}},
		{Name: "c.bias", DType: F32, Shape: []int64{3}},
	}
	m, err := Write(dir, specs, WriteOptions{Zeros: true, ShardBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Files) != 3 {
		t.Fatalf("files %v, want 3 shards (1 MiB each at most)", m.Files)
	}
	ck, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if ck.TotalBytes() != m.TotalBytes || m.TotalBytes != 1024*512*2+2048*1024+12 {
		t.Fatalf("total %d, manifest %d", ck.TotalBytes(), m.TotalBytes)
	}
	for _, s := range specs {
		tn, _ := ck.Tensor(s.Name)
		r, err := ck.Section(s.Name)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, tn.Bytes)
		if _, err := r.ReadAt(got, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, make([]byte, tn.Bytes)) {
			t.Errorf("%s: not zeros", s.Name)
		}
		sum, err := ck.Checksum(s.Name)
		if err != nil {
			t.Fatal(err)
		}
		if sum != m.Checksums[s.Name] {
			t.Errorf("%s: checksum %#x, manifest %#x", s.Name, sum, m.Checksums[s.Name])
		}
	}
}
