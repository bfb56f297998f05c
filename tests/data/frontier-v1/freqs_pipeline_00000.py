[
[('forward', 855), ('forward', 855), ('forward', 855), ('forward', 855), ('backward', 855), ('backward', 855), ('backward', 855), ('backward', 855)],
[('forward', 855), ('forward', 855), ('forward', 855), ('forward', 855), ('backward', 855), ('backward', 855), ('backward', 855), ('backward', 855)],
[('forward', 855), ('forward', 855), ('forward', 855), ('forward', 855), ('backward', 855), ('backward', 855), ('backward', 855), ('backward', 855)],
[('forward', 855), ('forward', 855), ('forward', 855), ('forward', 855), ('backward', 855), ('backward', 855), ('backward', 855), ('backward', 855)],
[('forward', 855), ('forward', 855), ('forward', 855), ('forward', 855), ('backward', 855), ('backward', 855), ('backward', 855), ('backward', 855)],
[('forward', 855), ('forward', 855), ('forward', 855), ('backward', 855), ('forward', 855), ('backward', 855), ('backward', 855), ('backward', 855)],
[('forward', 855), ('forward', 855), ('backward', 855), ('forward', 855), ('backward', 855), ('forward', 855), ('backward', 855), ('backward', 855)],
[('forward', 855), ('backward', 855), ('forward', 855), ('backward', 855), ('forward', 855), ('backward', 855), ('forward', 855), ('backward', 855)],
]
# Measured iteration time: 2.432545 s
# Measured iteration energy: 2649.5818 J
# Effective energy (above blocking): 1021.9170 J
