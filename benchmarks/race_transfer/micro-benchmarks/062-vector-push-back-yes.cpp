/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Select the prime numbers below a bound into a std::vector. Candidates
 * are tested in a parallel loop; primes are appended to the vector.
 */
#include <cstdio>
#include <vector>

static bool is_prime(int n)
{
  if (n < 2)
    return false;
  for (int d = 2; d * d <= n; d++)
    if (n % d == 0)
      return false;
  return true;
}

int main()
{
  const int bound = 50000;
  std::vector<int> primes;
  primes.reserve(bound);

#pragma omp parallel for schedule(dynamic, 256)
  for (int n = 2; n < bound; n++) {
    if (is_prime(n))
      primes.push_back(n);
  }

  std::printf("%zu primes below %d\n", primes.size(), bound);
  return 0;
}
