/* fluidvim VNF — the element classes' table, generated from list.h: name and operations (each
 * defined by its file, elements/<file>.c). The parser looks classes up here by name
 * (click_parse.c), the data path calls push and the stats reply calls stats (click.c). */
#include "elements.h"

#define ELEMENT(E, Name, file) extern const struct element_ops file##_ops;
#include "list.h"
#undef ELEMENT

const struct element_class click_elements[EC_NCLASSES] = {
#define ELEMENT(E, Name, file) [EC_##E] = { #Name, &file##_ops },
#include "list.h"
#undef ELEMENT
};
