package main

import "strings"

// stopMatcher finds the request's stop strings in a choice's text as it
// streams: it holds back the tail that could still become a stop string,
// and at a match gives the text before it (the stop string itself is not
// returned, as the OpenAI API does).
type stopMatcher struct {
	stops   []string
	pending string
}

// push adds text and returns what may be sent now, and whether a stop
// string matched (then the text after it is dropped).
func (m *stopMatcher) push(text string) (string, bool) {
	m.pending += text
	at := -1
	for _, s := range m.stops {
		if i := strings.Index(m.pending, s); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	if at >= 0 {
		out := m.pending[:at]
		m.pending = ""
		return out, true
	}
	hold := 0
	for _, s := range m.stops {
		for k := min(len(s)-1, len(m.pending)); k > hold; k-- {
			if strings.HasSuffix(m.pending, s[:k]) {
				hold = k
				break
			}
		}
	}
	out := m.pending[:len(m.pending)-hold]
	m.pending = m.pending[len(m.pending)-hold:]
	return out, false
}

// flush returns the text held back, at the choice's end.
func (m *stopMatcher) flush() string {
	out := m.pending
	m.pending = ""
	return out
}
