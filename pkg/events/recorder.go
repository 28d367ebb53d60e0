// Package events records the operator's Kubernetes Events so that a
// Warning, which reports a failure, is not lost behind Normal Events.
//
// client-go 1.11 writes Events through an event correlator with a spam
// filter per source and object: a burst of 25 Events, then one every five
// minutes, for Normal and Warning Events alike. Events beyond that are
// dropped, not delayed, and the filter cannot be configured in 1.11
// (NewBroadcasterWithCorrelatorOptions came later). A Memcached whose size
// an autoscaler changes 25 times, each change a Normal DeploymentScaled,
// would thus lose the Warning of the failure that follows.
//
// NewRecorder therefore sends Normal and Warning Events through
// broadcasters of their own, so that each type has its own budget
// (TestWarningsHaveTheirOwnBudget; through the handler,
// TestWarningAfterManyScalesReachesTheAPI in pkg/stub).
package events

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/record"
)

// NewRecorder returns an EventRecorder that writes Events to sink as
// source, and logs them with logf, and a function that stops it. Normal
// and Warning Events go through separate broadcasters, whose correlators
// each have their own spam filter, so Normal Events never use the budget
// of the Warnings: a Warning is dropped only after 25 Warnings about the
// same object within minutes, and the operator records one only when the
// failure it reports starts or changes. Events of each type keep their
// order and client-go's folding of repeats into one Event with a count.
func NewRecorder(sink record.EventSink, scheme *runtime.Scheme, source corev1.EventSource, logf func(format string, args ...interface{})) (record.EventRecorder, func()) {
	var watches []watch.Interface
	newRecorder := func() record.EventRecorder {
		b := record.NewBroadcaster()
		watches = append(watches, b.StartLogging(logf), b.StartRecordingToSink(sink))
		return b.NewRecorder(scheme, source)
	}
	r := &recorder{normal: newRecorder(), warning: newRecorder()}
	return r, func() {
		for _, w := range watches {
			w.Stop()
		}
	}
}

// recorder sends each Event to the recorder of its type; Events of a type
// other than Normal and Warning go to normal, whose broadcaster drops them
// as client-go does.
type recorder struct {
	normal, warning record.EventRecorder
}

func (r *recorder) of(eventtype string) record.EventRecorder {
	if eventtype == corev1.EventTypeWarning {
		return r.warning
	}
	return r.normal
}

func (r *recorder) Event(object runtime.Object, eventtype, reason, message string) {
	r.of(eventtype).Event(object, eventtype, reason, message)
}

func (r *recorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{}) {
	r.of(eventtype).Eventf(object, eventtype, reason, messageFmt, args...)
}

func (r *recorder) PastEventf(object runtime.Object, timestamp metav1.Time, eventtype, reason, messageFmt string, args ...interface{}) {
	r.of(eventtype).PastEventf(object, timestamp, eventtype, reason, messageFmt, args...)
}

func (r *recorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...interface{}) {
	r.of(eventtype).AnnotatedEventf(object, annotations, eventtype, reason, messageFmt, args...)
}
