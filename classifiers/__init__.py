"""Root-cause classifiers (``faultline.classifiers``).

Rules from the versioned taxonomy for what is certain (an Xid code is a fact); learned
models (scikit-learn, spaCy) for free text that is not.
"""
