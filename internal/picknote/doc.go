// Package picknote carries an attempt's note from the call path to the
// outlier balancer's picker, so that the balancer's slow-call detector times
// a call with the engine's own readings of the clock instead of reading the
// clock itself, at the pick and again at Done.
//
// grpcmw makes each attempt's context (each hedged copy's, each stream
// attempt's) a [Note] when its chain's outlierDetection times calls
// (slowCalls on): a unary attempt's from [New], a stream's from
// [NewShared]. The picker
// (grpcmw/outlier) finds the note in the pick's context and notes the
// endpoint it picked ([Note.Picked]); once the attempt has ended, the engine
// says how long it took, and grpcmw passes that and the attempt's error on
// to the endpoint ([Note.Took]), which counts the call as slow or not. A
// pick whose context holds no note (a call of a client without meshless's
// interceptor) is timed by the picker itself.
package picknote
