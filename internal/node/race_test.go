package node

import (
	"regexp"
	"strings"
)

// accessLine starts the description of one of a race report's two
// accesses ("Write at 0x… by goroutine 7:", "Previous read at …").
var accessLine = regexp.MustCompile(`^(Previous )?(Atomic )?(read|write|Read|Write) at `)

// raceReports splits the race detector's output in stderr into its
// reports, and sorts them into those whose accesses start in gpuarena's
// code (either access's innermost frame) and the others.
func raceReports(stderr string) (ours, upstream []string) {
	for _, block := range strings.Split(stderr, "==================") {
		if !strings.Contains(block, "WARNING: DATA RACE") {
			continue
		}
		lines := strings.Split(block, "\n")
		mine := false
		for i, l := range lines {
			if accessLine.MatchString(strings.TrimSpace(l)) && i+1 < len(lines) &&
				strings.Contains(lines[i+1], "github.com/gpuarena/gpuarena/") {
				mine = true
			}
		}
		if mine {
			ours = append(ours, block)
		} else {
			upstream = append(upstream, block)
		}
	}
	return ours, upstream
}
