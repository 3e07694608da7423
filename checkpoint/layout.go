package checkpoint

import (
	"cmp"
	"slices"
	"strconv"
)

// checkLayout checks where one file's tensors lie in its data area of
// dataLen bytes (the file's size − 8 − the header length) and returns the
// tensors sorted by offset. The rules are the reference reader's
// Metadata::validate and the README's notes: sorted by data_offsets, each
// tensor begins where the previous one ends (the first at 0), so no two
// overlap (ErrOverlap) and no byte is left out (ErrHole: "the byte buffer
// needs to be entirely indexed, and cannot contain holes"), and the last
// ends exactly at the end of the data area (a data area shorter than that
// is ErrTruncated, a longer one ErrHole). Tensors of zero bytes take no
// room and may share an offset.
func checkLayout(file string, tensors []headerTensor, dataLen int64) ([]headerTensor, error) {
	sorted := slices.Clone(tensors)
	slices.SortFunc(sorted, func(a, b headerTensor) int {
		return cmp.Or(cmp.Compare(a.begin, b.begin), cmp.Compare(a.end, b.end), cmp.Compare(a.name, b.name))
	})
	size := uint64(dataLen)
	var at uint64 // where the next tensor must begin
	prev := ""    // the tensor that ends at `at`
	for _, t := range sorted {
		switch {
		case t.begin < at:
			return nil, fail(ErrOverlap, file, t.name, "its bytes "+span(t.begin, t.end)+" overlap those of "+
				quote(prev)+", which end at "+strconv.FormatUint(at, 10)+
				" (offsets relative to the data area): the header is corrupt or its writer broken; fetch or write the file again")
		case t.begin > at:
			after := "the start of the data area"
			if prev != "" {
				after = quote(prev)
			}
			return nil, fail(ErrHole, file, t.name, "bytes "+span(at, t.begin)+" between "+after+
				" and this tensor belong to no tensor (the format requires the data area to be entirely indexed): "+
				"the header is corrupt or its writer broken; fetch or write the file again")
		case t.end > size:
			return nil, fail(ErrTruncated, file, t.name, "its bytes "+span(t.begin, t.end)+" end past the data area, which holds "+
				strconv.FormatInt(dataLen, 10)+" bytes: the file is cut short (an interrupted download or copy?); fetch it again")
		}
		if t.end > t.begin || prev == "" {
			prev = t.name
		}
		at = t.end
	}
	if at < size {
		last := ""
		if len(sorted) > 0 {
			last = sorted[len(sorted)-1].name
		}
		where := "after the last tensor"
		if last == "" {
			where = "in a file with no tensors"
		}
		return nil, fail(ErrHole, file, last, "bytes "+span(at, size)+" of the data area "+where+
			" belong to no tensor (the format requires the data area to be entirely indexed): "+
			"the file has bytes appended, or the header lost a tensor; fetch or write the file again")
	}
	return sorted, nil
}

// span writes a byte range as "[begin, end)".
func span(begin, end uint64) string {
	return "[" + strconv.FormatUint(begin, 10) + ", " + strconv.FormatUint(end, 10) + ")"
}
