// Turns configured patterns into kernel patterns, and single-dimension matches
// into multi-dimensional detections (Moazeni 2013 §7.4.2 phase 2, §7.4.6 ranking),
// then into alerts (the decision between positive and negative examples, and
// the gating: minimum duration, hysteresis, cooldown). docs/detection.md
// describes the semantics.
//
// Everything here works on the backend's single-dim matches only, so every
// backend yields the same detections.
//
// The parts: library.h (compiling patterns), combination.h (phase 2's
// multi-dimensional match), decision.h (positive against negative examples)
// and pattern_tracker.h (per stream and pattern, with the gating).
#pragma once

#include "pipeline/combination.h"
#include "pipeline/decision.h"
#include "pipeline/library.h"
#include "pipeline/pattern_tracker.h"
