# ruff: noqa: E501 - the turns are model code, one string each as a model wrote it
"""Multi-turn code written the way models write it (numpy, pandas, sympy, plain Python), turn by turn.

Each sequence is what one model wrote over several rounds of one task: values made in one turn are
used in the next ones, as in real transcripts (``x, d = symbols('x d')`` then ``solve(eq, d)``).
``bench/bench_values.py`` replays them through the sandbox and through plain CPython.
"""

from __future__ import annotations

SEQUENCES: list[list[str]] = [
    # 1 sympy: symbols in one turn, solve in the next
    [
        "from sympy import symbols, Eq, solve\nx, d = symbols('x d')\neq = Eq(x**2 - 4*d, 0)\nprint(eq)",
        "sol = solve(eq, d)\nprint(sol)",
        "print(sol[0].subs(x, 6))",
    ],
    # 2 numpy array then statistics
    [
        "import numpy as np\ndata = np.array([3.2, 4.8, 5.1, 2.9, 6.3])\nprint(data.shape)",
        "mean = data.mean()\nstd = data.std(ddof=1)\nprint(f'mean={mean:.3f}, std={std:.3f}')",
        "z = (data - mean) / std\nprint(np.round(z, 2))",
    ],
    # 3 pandas DataFrame built, then grouped
    [
        "import pandas as pd\ndf = pd.DataFrame({'region': ['N', 'S', 'N', 'E', 'S'], 'sales': [120, 80, 95, 60, 130]})\n"
        "print(df.head())",
        "summary = df.groupby('region')['sales'].sum().sort_values(ascending=False)\nprint(summary)",
        "print(summary.index[0], summary.iloc[0])",
    ],
    # 4 plain python accumulation
    [
        "primes = []\nfor n in range(2, 50):\n    if all(n % p for p in primes):\n        primes.append(n)\nprint(len(primes))",
        "twin = [(p, q) for p, q in zip(primes, primes[1:]) if q - p == 2]\nprint(twin)",
    ],
    # 5 sympy calculus across turns
    [
        "import sympy as sp\nt = sp.symbols('t')\nf = sp.exp(-t) * sp.sin(2*t)\nprint(f)",
        "df_dt = sp.diff(f, t)\nprint(sp.simplify(df_dt))",
        "area = sp.integrate(f, (t, 0, sp.oo))\nprint(area)",
    ],
    # 6 numpy linear algebra
    [
        "import numpy as np\nA = np.array([[2.0, 1.0], [1.0, 3.0]])\nb = np.array([1.0, 2.0])",
        "x = np.linalg.solve(A, b)\nprint(x)",
        "print(np.allclose(A @ x, b), np.linalg.det(A).round(6))",
    ],
    # 7 pandas cleaning with NaN
    [
        "import pandas as pd\nimport numpy as np\nraw = pd.DataFrame({'a': [1, np.nan, 3, 4], 'b': ['x', 'y', None, 'w']})",
        "print(raw.isna().sum())",
        "clean = raw.dropna()\nprint(clean)\nprint(clean['a'].mean())",
    ],
    # 8 dict of results reused
    [
        "scores = {'alice': [90, 85, 77], 'bob': [60, 75, 88], 'carol': [95, 92, 99]}",
        "avg = {k: sum(v) / len(v) for k, v in scores.items()}\nprint(avg)",
        "best = max(avg, key=avg.get)\nprint(best, round(avg[best], 2))",
    ],
    # 9 sympy system of equations
    [
        "from sympy import symbols, Eq, solve\na, b = symbols('a b')\ne1 = Eq(2*a + b, 7)\ne2 = Eq(a - b, -1)",
        "res = solve((e1, e2), (a, b))\nprint(res)",
        "print(res[a] * res[b])",
    ],
    # 10 numpy random with a seed
    [
        "import numpy as np\nrng = np.random.default_rng(42)\nsamples = rng.normal(0, 1, 1000)",
        "print(round(float(samples.mean()), 4), round(float(samples.std()), 4))",
        "hist, edges = np.histogram(samples, bins=5)\nprint(hist.tolist())",
    ],
    # 11 pandas time series
    [
        "import pandas as pd\nidx = pd.date_range('2024-01-01', periods=6, freq='D')\n"
        "ts = pd.Series([5, 7, 6, 9, 12, 11], index=idx)",
        "rolling = ts.rolling(3).mean()\nprint(rolling)",
        "print(ts.idxmax().date(), ts.max())",
    ],
    # 12 a helper function defined then used
    [
        "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\nprint(fib(10))",
        "fibs = [fib(i) for i in range(15)]\nprint(fibs)",
        "ratios = [fibs[i+1] / fibs[i] for i in range(5, 14)]\nprint(round(ratios[-1], 6))",
    ],
    # 13 sympy matrix
    [
        "import sympy as sp\nM = sp.Matrix([[4, 1], [2, 3]])\nprint(M)",
        "ev = M.eigenvals()\nprint(ev)",
        "P, D = M.diagonalize()\nprint(D)",
    ],
    # 14 numpy masking
    [
        "import numpy as np\ntemps = np.array([12.5, 18.0, 22.3, 9.8, 30.1, 25.4])",
        "hot = temps[temps > 20]\nprint(hot, hot.size)",
        "print(np.where(temps > 20, 'hot', 'mild'))",
    ],
    # 15 pandas merge
    [
        "import pandas as pd\norders = pd.DataFrame({'id': [1, 2, 3], 'cust': ['a', 'b', 'a'], 'amt': [10.0, 20.5, 7.25]})\n"
        "custs = pd.DataFrame({'cust': ['a', 'b'], 'name': ['Ann', 'Bo']})",
        "merged = orders.merge(custs, on='cust')\nprint(merged)",
        "print(merged.groupby('name')['amt'].agg(['sum', 'count']))",
    ],
    # 16 string processing
    [
        "text = 'the quick brown fox jumps over the lazy dog the end'\nwords = text.split()",
        "from collections import Counter\ncounts = Counter(words)\nprint(counts.most_common(2))",
        "print(sorted(set(words))[:4])",
    ],
    # 17 sympy series and limits
    [
        "from sympy import symbols, sin, series, limit\nx = symbols('x')\nexpr = sin(x) / x",
        "print(limit(expr, x, 0))",
        "print(series(sin(x), x, 0, 6))",
    ],
    # 18 numpy polynomial fit
    [
        "import numpy as np\nxs = np.arange(10)\nys = 3 * xs**2 + 2 * xs + 1",
        "coef = np.polyfit(xs, ys, 2)\nprint(np.round(coef, 6))",
        "p = np.poly1d(coef)\nprint(round(float(p(12)), 4))",
    ],
    # 19 pandas pivot
    [
        "import pandas as pd\nsales = pd.DataFrame({'month': ['jan', 'jan', 'feb', 'feb'], 'shop': ['x', 'y', 'x', 'y'], "
        "'units': [3, 5, 4, 6]})",
        "table = sales.pivot(index='month', columns='shop', values='units')\nprint(table)",
        "print(table.sum(axis=1).to_dict())",
    ],
    # 20 error then fix in the next turn (the model sees the NameError of its own typo)
    [
        "import numpy as np\nvalues = np.array([1, 2, 3, 4])",
        "print(valeus.sum())",
        "print(values.sum(), values.cumsum())",
    ],
    # 21 sympy factor / expand
    [
        "import sympy as sp\nx, y = sp.symbols('x y')\npoly = (x + y)**3",
        "expanded = sp.expand(poly)\nprint(expanded)",
        "print(sp.factor(expanded - y**3))",
    ],
    # 22 class defined in one turn, instances in the next
    [
        "from dataclasses import dataclass\n@dataclass\nclass Item:\n    name: str\n    price: float\n"
        "cart = [Item('pen', 1.5), Item('book', 12.0)]",
        "total = sum(i.price for i in cart)\nprint(total)",
        "cart.append(Item('bag', 30.0))\nprint(len(cart), max(cart, key=lambda i: i.price).name)",
    ],
    # 23 numpy broadcasting, 2D
    [
        "import numpy as np\ngrid = np.arange(12).reshape(3, 4)\nprint(grid)",
        "col_means = grid.mean(axis=0)\nprint(col_means)",
        "centered = grid - col_means\nprint(centered.sum(axis=0))",
    ],
    # 24 pandas apply and new columns
    [
        "import pandas as pd\npeople = pd.DataFrame({'name': ['ann', 'bob', 'cy'], 'age': [31, 17, 45]})",
        "people['adult'] = people['age'] >= 18\npeople['name'] = people['name'].str.title()\nprint(people)",
        "print(people[people.adult].name.tolist())",
    ],
    # 25 sympy solve then numeric evaluation
    [
        "from sympy import symbols, solve, N, sqrt\nr = symbols('r', positive=True)\narea_eq = 3.14159 * r**2 - 50",
        "radius = solve(area_eq, r)\nprint(radius)",
        "print(round(float(radius[0]), 4))",
    ],
    # 26 a generator kept between turns (no snapshot; the warm sandbox keeps it)
    [
        "def counter():\n    n = 0\n    while True:\n        n += 1\n        yield n\ngen = counter()\nprint(next(gen))",
        "print(next(gen), next(gen))",
    ],
    # 27 numpy stats on a DataFrame column
    [
        "import numpy as np\nimport pandas as pd\nm = pd.DataFrame({'h': [1.62, 1.75, 1.80, 1.68], 'w': [55.0, 72.5, 80.1, 60.3]})",
        "m['bmi'] = m['w'] / m['h'] ** 2\nprint(m.round(2))",
        "corr = np.corrcoef(m['h'], m['w'])[0, 1]\nprint(round(float(corr), 4))",
    ],
    # 28 sets and sorting
    [
        "a = {3, 1, 4, 1, 5, 9, 2, 6}\nb = {2, 7, 1, 8, 2, 8}",
        "print(sorted(a & b), sorted(a | b))",
        "diff = sorted(a - b)\nprint(diff, sum(diff))",
    ],
    # 29 sympy rational arithmetic
    [
        "from sympy import Rational, nsimplify\nq = Rational(3, 7) + Rational(2, 5)\nprint(q)",
        "print(q * 35, nsimplify(0.125))",
    ],
    # 30 pandas describe then filter with query
    [
        "import pandas as pd\ninv = pd.DataFrame({'sku': ['a1', 'b2', 'c3', 'd4'], 'qty': [5, 0, 12, 3], 'price': [2.5, 9.0, 1.25, 4.0]})",
        "inv['value'] = inv.qty * inv.price\nprint(inv.describe().loc[['mean', 'max']])",
        "low = inv.query('qty < 4')\nprint(low.sku.tolist(), low.value.sum())",
    ],
    # 31 numpy integer scalars reused
    [
        "import numpy as np\ncounts = np.array([4, 8, 15, 16, 23, 42])\nbiggest = counts.max()\nidx = counts.argmax()",
        "print(type(biggest).__name__, biggest, idx)\nprint(biggest * 2 + idx)",
    ],
    # 32 json-ish nested data
    [
        "config = {'layers': [64, 32, 16], 'act': 'relu', 'dropout': 0.1}",
        "config['layers'].append(8)\nparams = sum(a * b for a, b in zip(config['layers'], config['layers'][1:]))\nprint(params)",
        "print(config)",
    ],
]
