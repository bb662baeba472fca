/* An LD_PRELOAD shim for tests: getaddrinfo() of $FAKE_DNS_NAME answers the IPv4 addresses
 * listed in $FAKE_DNS_FILE (whitespace-separated), read anew on every call, so that a test can
 * change what a name resolves to while a process runs. Every other name goes to glibc. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*getaddrinfo_fn)(const char*, const char*, const struct addrinfo*, struct addrinfo**);

int getaddrinfo(const char* node, const char* service, const struct addrinfo* hints, struct addrinfo** res) {
    getaddrinfo_fn real = (getaddrinfo_fn)dlsym(RTLD_NEXT, "getaddrinfo");
    const char* name = getenv("FAKE_DNS_NAME");
    const char* file = getenv("FAKE_DNS_FILE");
    if (node == NULL || name == NULL || file == NULL || strcmp(node, name) != 0) {
        return real(node, service, hints, res);
    }
    FILE* f = fopen(file, "r");
    if (f == NULL) {
        return EAI_NONAME;
    }
    /* Each address's own glibc list, chained: glibc's freeaddrinfo frees them one by one. */
    struct addrinfo* head = NULL;
    struct addrinfo** tail = &head;
    char ip[64];
    while (fscanf(f, "%63s", ip) == 1) {
        struct addrinfo* one = NULL;
        if (real(ip, service, hints, &one) == 0) {
            *tail = one;
            while (*tail != NULL) {
                tail = &(*tail)->ai_next;
            }
        }
    }
    fclose(f);
    if (head == NULL) {
        return EAI_NONAME;
    }
    *res = head;
    return 0;
}
