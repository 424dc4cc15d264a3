// challenge_variants.h: what the challenge benchmark times. Every variant is a
// launcher with the challenge part's contract, compiled in its own
// translation unit (the ladder's rungs and the reference are renamed from
// launchChallenge by a -D on the compiler's command line).
#pragma once

using Launcher = void (*)(const float* M, const float* N, float* P, int j, int k, int l);

struct Variant {
  const char* name;
  Launcher launch;
};

extern const Variant kTuneVariants[];
extern const int kTuneVariantCount;
