package arena

// Buffer is one row of a Plan: the size of one intermediate tensor.
type Buffer struct {
	ID    BufferID
	DType DType
	// Shape in elements, outermost first ([M, hidden_size]); nil when absent.
	Shape []int64
	// Bytes is the product of Shape and DType.Size(), overflow-checked; 0 when absent.
	Bytes int64
	// Absent says why the buffer has no bytes ("no MoE layers"); empty when present.
	Absent string
}

// Present reports whether the buffer gets a device allocation.
func (b Buffer) Present() bool { return b.Bytes > 0 }

// SlabSpec is one slab of a Plan: a single allocation carved bump-only at run time.
type SlabSpec struct {
	Name  string
	Bytes int64
}

// Plan is the sized arena for one model and one set of serving options:
// one Buffer per BufferID, the slabs, and their total. It is computed by
// PlanFor and touches no device.
type Plan struct {
	// ModelType is the config's model_type ("qwen3_next").
	ModelType string
	// Notes explains planning choices a reader should know ("unknown model_type
	// \"foo\": planned as dense"); Fit repeats them first in FitReport.Notes.
	Notes   []string
	Options Options
	// Buffers is indexed by BufferID.
	Buffers [NumBuffers]Buffer
	Slabs   []SlabSpec
	// DecodeMeta is the layout of the decode metadata inside the scratch buffer.
	DecodeMeta DecodeMetaLayout
	// BufferBytes is the sum of Buffers' bytes; SlabBytes of Slabs'; TotalBytes both.
	BufferBytes int64
	SlabBytes   int64
	TotalBytes  int64
}
