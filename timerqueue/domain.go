package timerqueue

import "strconv"

// Domain is a timer's time domain: event time advances with the watermark,
// processing time with the backend's clock. Its value is part of the
// snapshot and delta formats.
type Domain uint8

const (
	EventTime Domain = iota
	ProcessingTime
)

// String returns "event" or "processing".
func (d Domain) String() string {
	switch d {
	case EventTime:
		return "event"
	case ProcessingTime:
		return "processing"
	}
	return "domain(" + strconv.Itoa(int(d)) + ")"
}
