// A shared object with a function of its own and no part binding: tilelab-part-host must refuse it.
extern "C" int tilelab_not_a_part() { return 0; }
