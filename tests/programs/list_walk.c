/* Walk a linked list whose nodes were shuffled in memory: pointer chasing. */
#include <stdio.h>
#include <stdlib.h>
#define NODES 6000
struct node { struct node *next; long value; char pad[48]; };

int main(void) {
    struct node *nodes = malloc(sizeof(struct node) * NODES);
    int *order = malloc(sizeof(int) * NODES);
    if (!nodes || !order) return 1;
    for (int i = 0; i < NODES; i++) order[i] = i;
    unsigned x = 12345;
    for (int i = NODES - 1; i > 0; i--) {  /* Fisher-Yates with a fixed LCG */
        x = x * 1103515245u + 12345u;
        int j = (int)((x >> 8) % (unsigned)(i + 1));
        int t = order[i]; order[i] = order[j]; order[j] = t;
    }
    for (int i = 0; i < NODES; i++) {
        nodes[order[i]].next = &nodes[order[(i + 1) % NODES]];
        nodes[order[i]].value = i;
    }
    long sum = 0;
    struct node *p = &nodes[order[0]];
    for (int step = 0; step < 4 * NODES; step++) {
        sum += p->value;
        p = p->next;
    }
    printf("%ld\n", sum);
    free(order);
    free(nodes);
    return 0;
}
